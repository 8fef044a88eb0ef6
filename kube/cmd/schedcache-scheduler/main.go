// Command schedcache-scheduler is a secondary Kubernetes scheduler built
// on schedcache: it binds the pods whose spec.schedulerName names one of
// its profiles, with upstream's default plugins. See
// docs/kube-integration.md for deploying it; `schedcache-scheduler -h`
// for its flags.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/schedcache/schedcache/kube/cmd/schedcache-scheduler/app"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := app.Main(ctx, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
