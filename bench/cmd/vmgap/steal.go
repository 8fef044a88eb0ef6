package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc/stat (100 on every Linux
// architecture Go supports).
const clockTicks = 100

// readSteal returns the steal ticks of the "cpu" line of /proc/stat, and
// false where there is no such file or field.
func readSteal() (uint64, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	v, err := parseSteal(f)
	return v, err == nil
}

// parseSteal reads the aggregate "cpu" line: user nice system idle iowait
// irq softirq steal ...; steal is the eighth number.
func parseSteal(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return 0, fmt.Errorf("cpu line has %d fields, want at least 9", len(f))
		}
		return strconv.ParseUint(f[8], 10, 64)
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no cpu line")
}
