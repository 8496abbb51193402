package fleet

import (
	"testing"
	"time"
)

// TestDuration_JSONMilliseconds: seconds with at most three decimals
// (1,122 ms printed as 1.1219999999999999).
func TestDuration_JSONMilliseconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1122 * time.Millisecond:          "1.122",
		1122*time.Millisecond + 400*1000: "1.122",
		0:                                "0",
		90 * time.Second:                 "90",
		1593 * time.Millisecond:          "1.593",
	} {
		b, err := Duration(d).MarshalJSON()
		if err != nil || string(b) != want {
			t.Errorf("%v: %s, %v, want %s", d, b, err, want)
		}
	}
}
