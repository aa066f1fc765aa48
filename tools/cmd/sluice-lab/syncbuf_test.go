package main

import "github.com/sluice-rpc/sluice/tools/cmd/internal/clitest"

// syncBuffer is clitest.SyncBuffer, by the name the tests here use.
type syncBuffer = clitest.SyncBuffer
