#pragma once
// Every Kubernetes API path that names an object goes through here. Names come from objects,
// flags and, in `gpuorch extender`, from the peer's request: a name holding '/', '?', '#' or ".."
// put into a path as it is makes the request address another resource (issue 30: a bind to
// `/api/v1/nodes/node-0/binding`, or with `?dryRun=All`). So each name is first checked against
// the rule Kubernetes itself applies to that kind of name (apimachinery's validation: namespaces
// are DNS-1123 labels, pods, nodes and leases DNS-1123 subdomains), and then percent-encoded as
// one RFC 3986 path segment, which a checked name never needs but which keeps the path one
// segment per name whatever a future caller passes.
#include <stdexcept>
#include <string>
#include <string_view>

namespace gpuorch::k8s {

// A name that breaks Kubernetes' rule for its kind; what() is one line, the name escaped and cut.
struct InvalidName : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters (namespaces).
[[nodiscard]] bool is_dns1123_label(std::string_view s);
// Such labels joined by '.', at most 253 characters in all (pods, nodes, leases, most objects;
// apimachinery's IsDNS1123Subdomain bounds only the whole, not each label).
[[nodiscard]] bool is_dns1123_subdomain(std::string_view s);

// Throw InvalidName "<what> 'x' is not a valid DNS-1123 label (...)" unless the check passes.
void require_dns1123_label(std::string_view s, std::string_view what);
void require_dns1123_subdomain(std::string_view s, std::string_view what);

// RFC 3986: the unreserved characters (ALPHA / DIGIT / "-" / "." / "_" / "~") stay, every other
// byte becomes %XX; "." and ".." (dot-segments, which a client or proxy may collapse) are encoded
// as %2E. For a path segment and for a query value alike.
[[nodiscard]] std::string percent_encode(std::string_view s);

// "/api/v1/namespaces/NS/pods/NAME" (+ "/" + subresource when given): NS checked as a label, NAME
// as a subdomain, both encoded. Throws InvalidName.
[[nodiscard]] std::string pod_path(std::string_view ns, std::string_view name,
                                   std::string_view subresource = {});
// "<group_version>/namespaces/NS/<resource>[/NAME]" for any namespaced kind, e.g.
// namespaced_path("/apis/coordination.k8s.io/v1", "kube-system", "leases", "gpuorch"); the
// resource and group are the caller's constants, the names are checked and encoded.
[[nodiscard]] std::string namespaced_path(std::string_view group_version, std::string_view ns,
                                          std::string_view resource, std::string_view name = {});
// "/api/v1/nodes/NAME" (+ "/" + subresource).
[[nodiscard]] std::string node_path(std::string_view name, std::string_view subresource = {});

}  // namespace gpuorch::k8s
