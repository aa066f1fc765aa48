//go:build !linux

package hostile

import "os"

// maxRSS is unknown off Linux: 0.
func maxRSS(*os.ProcessState) int64 { return 0 }
