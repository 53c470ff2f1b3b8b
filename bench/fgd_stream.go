// fgd_stream prints the random choices the FGD study's simulator makes for one trace and seeds A..B,
// drawn from Go's math/rand exactly as the simulator draws them, so that bench/fgd_replay can run
// gpuorch's scheduler on the study's own arrival order and node ranking. gpuorch itself does not
// use Go's stream (its results are a different sample of the same random experiment); this is a
// check of the rules, used by scripts/compare-fgd --go-stream.
//
//	go run bench/fgd_stream.go TRACE.csv A B > stream.txt
//
// One line per seed: "seed n a_1 .. a_n r_1 .. r_1213", where a_i are indices into the trace's pods
// sorted by name (arrival order: shuffled trace, then tuning clones or removals) and r_k is the
// rank of the k-th node in name order (the "%04d-" prefix; ties go to the smallest).
//
// The sequence, from the simulator (pkg/simulator/core.go Simulate, simulator.go):
// rand.Seed(seed); one rand.Int() (a debug-log argument); sort pods by name and rand.Shuffle;
// tune to 1.3 x the GPU capacity (rand.Intn over the name-sorted trace, appending clones, or
// rand.Intn over the list, removing pods); 10 further draws (before the nodes are created;
// found by matching the published per-seed results); rand.Perm(number of nodes).
package main

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
)

const (
	nodes       = 1213    // openb_node_list_gpu_node.csv
	gpuCapacity = 6212000 // milli-GPU of those nodes
	tune        = 1.3
	extraDraws  = 10
)

type pod struct {
	name  string
	milli int64 // per GPU; 0 for a CPU-only pod
	count int64
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: fgd_stream TRACE.csv FIRST_SEED LAST_SEED")
		os.Exit(2)
	}
	first, err1 := strconv.Atoi(os.Args[2])
	last, err2 := strconv.Atoi(os.Args[3])
	f, err := os.Open(os.Args[1])
	if err != nil || err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "fgd_stream: bad arguments")
		os.Exit(2)
	}
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fgd_stream:", err)
		os.Exit(2)
	}
	var pods []pod
	for _, r := range rows[1:] {
		count, _ := strconv.ParseInt(r[3], 10, 64)
		milli, _ := strconv.ParseInt(r[4], 10, 64)
		if count == 0 || milli <= 0 {
			count, milli = 0, 0
		} else if milli > 1000 {
			milli = 1000
		}
		pods = append(pods, pod{r[0], milli, count})
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].name < pods[j].name })
	var traceDemand int64
	for _, p := range pods {
		traceDemand += p.milli * p.count
	}
	target := tune * float64(gpuCapacity)

	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for seed := first; seed <= last; seed++ {
		rand.Seed(int64(seed))
		_ = rand.Int()
		order := make([]int, len(pods))
		for i := range order {
			order[i] = i
		}
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		demand := traceDemand
		if float64(demand) < target {
			for {
				i := rand.Intn(len(pods))
				if float64(demand+pods[i].milli) > target {
					break
				}
				demand += pods[i].milli * pods[i].count
				order = append(order, i)
			}
		} else {
			for float64(demand) > target {
				at := rand.Intn(len(order))
				demand -= pods[order[at]].milli * pods[order[at]].count
				order = append(order[:at], order[at+1:]...)
			}
		}
		for k := 0; k < extraDraws; k++ {
			rand.Int63()
		}
		rank := rand.Perm(nodes)
		fmt.Fprintf(w, "%d %d", seed, len(order))
		for _, i := range order {
			fmt.Fprintf(w, " %d", i)
		}
		for _, r := range rank {
			fmt.Fprintf(w, " %d", r)
		}
		fmt.Fprintln(w)
	}
}
