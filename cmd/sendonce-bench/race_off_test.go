//go:build !race

package main

// raceEnabled says the test binary runs under the race detector; the
// processes its tests start are then built with it too.
const raceEnabled = false
