/* The pod sandbox's process for the test nodes of scripts/k8s-testenv (docs/k8s-testenv.md):
 * holds the pod's namespaces, reaps orphaned children, exits on SIGINT or SIGTERM. Built static
 * (gcc -O2 -static) into the locally made image registry.k8s.io/pause:3.10.1; nothing is pulled. */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) { _exit(sig == SIGTERM ? 0 : 128 + sig); }

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
}
