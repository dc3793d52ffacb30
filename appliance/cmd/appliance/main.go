// Command appliance is the RDMA dataplane appliance; see package cli.
package main

import (
	"os"

	"github.com/rdma-appliance/appliance/appliance/cli"
)

func main() { os.Exit(cli.Run(os.Args[1:])) }
