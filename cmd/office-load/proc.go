package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the kernel's USER_HZ: /proc's CPU times are in these.
const clockTick = 100

// procCPU returns the CPU time pid has used: the sum of its threads'
// run time in nanoseconds (schedstat), or user + system in clock ticks
// where schedstat is missing.
func procCPU(pid int) (time.Duration, error) {
	if d, ok := schedCPU(pid); ok {
		return d, nil
	}
	return tickCPU(pid)
}

// schedCPU sums /proc/pid/task/*/schedstat's first field.
func schedCPU(pid int) (time.Duration, bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var total time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, false
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += time.Duration(ns)
	}
	return total, true
}

// tickCPU is user + system time from /proc/pid/stat.
func tickCPU(pid int) (time.Duration, error) {
	f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	// Fields after the command: state is [0], utime [11], stime [12].
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// procStatFields returns /proc/pid/stat's fields after the command name.
func procStatFields(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 > len(s) {
		return nil, errors.New("bad /proc stat")
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return nil, errors.New("bad /proc stat")
	}
	return f, nil
}

// treeCPU returns the CPU time used by every live process below root
// (the agents and the keeper's watchdog), and how many there are.
func treeCPU(root int) (time.Duration, int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStatFields(pid)
		if err != nil {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var total time.Duration
	n := 0
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if d, err := procCPU(c); err == nil {
				total += d
				n++
			}
			queue = append(queue, c)
		}
	}
	return total, n
}

// procStatus returns a numeric field of /proc/pid/status (VmRSS in kB,
// Threads).
func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// ptyLimit reads the kernel's PTY limit and how many are in use.
func ptyLimit() (max, used int) {
	read := func(p string) int {
		b, _ := os.ReadFile(p)
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	return read("/proc/sys/kernel/pty/max"), read("/proc/sys/kernel/pty/nr")
}
