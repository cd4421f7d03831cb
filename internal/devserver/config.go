package devserver

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"

	"github.com/ctxflow/ctxflow/internal/freeport"
)

// internalIP is where the history, matching and worker services listen.
const internalIP = "127.0.0.1"

const clusterName = "active"

// DefaultDynamicConfig returns the dynamic config values Start uses unless
// Options.DynamicConfig overrides them. They tune the server for latency on a
// single small machine:
//
//   - history.transferProcessorMaxPollRPS (default 20): the transfer queue
//     dispatches activity and workflow tasks; at 20 polls/s each regular
//     activity waits ~50 ms for dispatch. 10000 cut a 4-activity turn from
//     200 ms to 72 ms here (DESIGN §9).
//   - history.longPollExpirationInterval = 1s (default 20s): history long
//     polls end after this and the SDK polls again. The history service's
//     event notifier drops a notification when the previous one is still
//     unread (one-slot channel, non-blocking send), so a client waiting for
//     a workflow's result (GetWorkflowExecutionHistory with WaitNewEvent)
//     sometimes misses the close event and waits for the expiry: measured
//     here for 0.3% of fast workflows with the transfer queue tuned above
//     (2% if the visibility queue is sped up too, which is why it is not),
//     a 20 s stall each with the default. Update waits use the same
//     interval; the SDK re-polls them too.
//   - matching.numTaskqueueRead/WritePartitions = 1 (default 4): one worker
//     process polls each task queue; partitions only add forwarding hops.
//     The Temporal CLI dev server does the same.
//   - system.forceSearchAttributesCacheRefreshOnRead stays false: true
//     re-read the cluster metadata from SQLite on every search attribute
//     lookup (each upsert, each visibility write), 4% of the server's CPU
//     under load. Start registers ctxflow's attributes in the database
//     before the server starts, so nothing needs the refresh.
//   - frontend.enableUpdateWorkflowExecution and
//     frontend.enableUpdateWorkflowExecutionAsyncAccepted = true: workflow
//     Updates (already the v1.32.1 defaults; set so that a change of default
//     cannot silently break Update-with-Start). ExecuteMultiOperation has no
//     switch in v1.32.1: it is always on.
//   - frontend.namespaceRPS.visibility = 100 (default 10) and
//     history.cacheHostLevelMaxSize = 8192: as the Temporal CLI dev server.
//   - history.transferProcessorUpdateAckInterval and
//     history.visibilityProcessorUpdateAckInterval = 1s (default 30s): a
//     workflow is deleted (an erase, DeleteWorkflowExecution) only once
//     its close is acknowledged by both queues, which these intervals
//     publish: a session erased just after its run closed waited 30 s.
//   - history.externalPayloadsEnabled = false (default true): with it the
//     history service walks every payload of every event it writes, to
//     count those kept in external storage (for the visibility record's
//     TemporalExternalPayload* attributes). ctxflow keeps none there (its
//     bodies are in the transcript store), and the walk was 2 % of a chat
//     turn's CPU (docs/benchmarks.md).
func DefaultDynamicConfig() map[string]any {
	return map[string]any{
		dynamicconfig.TransferProcessorMaxPollRPS.Key().String():                        10000,
		dynamicconfig.HistoryLongPollExpirationInterval.Key().String():                  time.Second,
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key().String():                 1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key().String():                1,
		dynamicconfig.FrontendEnableUpdateWorkflowExecution.Key().String():              true,
		dynamicconfig.FrontendEnableUpdateWorkflowExecutionAsyncAccepted.Key().String(): true,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key().String():       100,
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key().String():                       8192,
		dynamicconfig.TransferProcessorUpdateAckInterval.Key().String():                 time.Second,
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key().String():               time.Second,
		dynamicconfig.ExternalPayloadsEnabled.Key().String():                            false,
	}
}

// ports are the listening ports of the four services. httpAPI is the
// frontend's HTTP API (also used by Nexus), on frontendIP.
type ports struct {
	frontendIP                                string
	frontend, httpAPI, history, matching, wkr int
}

func (p ports) frontendAddr() string {
	return net.JoinHostPort(dialHost(p.frontendIP), strconv.Itoa(p.frontend))
}

func pickPorts(opts Options) (ports, error) {
	p := ports{frontendIP: opts.FrontendIP, frontend: opts.FrontendPort}
	var err error
	if p.frontend == 0 {
		if p.frontend, err = freePort(opts.FrontendIP); err != nil {
			return p, err
		}
	}
	if p.httpAPI, err = freePort(opts.FrontendIP); err != nil {
		return p, err
	}
	for _, port := range []*int{&p.history, &p.matching, &p.wkr} {
		if *port, err = freePort(internalIP); err != nil {
			return p, err
		}
	}
	return p, nil
}

// freePort is a free port for the server's own listeners; see
// [freeport.Port].
func freePort(ip string) (int, error) { return freeport.Port(ip) }

// dialHost is the address clients use to reach a service bound to ip.
func dialHost(ip string) string {
	if parsed := net.ParseIP(ip); parsed == nil || parsed.IsUnspecified() {
		return internalIP
	}
	return ip
}

func buildServerOptions(opts Options, p ports, db *dbConfig, logger log.Logger) ([]temporal.ServerOption, error) {
	conf := buildConfig(p, db)
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("create authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, logger)
	if err != nil {
		return nil, fmt.Errorf("create claim mapper: %w", err)
	}

	dyn := dynamicconfig.StaticClient{}
	for k, v := range DefaultDynamicConfig() {
		dyn[dynamicconfig.MakeKey(k)] = v
	}
	for k, v := range opts.DynamicConfig {
		dyn[dynamicconfig.MakeKey(k)] = v
	}

	host := func(port int) static.Hosts {
		return static.SingleLocalHost(net.JoinHostPort(internalIP, strconv.Itoa(port)))
	}
	return []temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
			primitives.FrontendService: static.SingleLocalHost(p.frontendAddr()),
			primitives.HistoryService:  host(p.history),
			primitives.MatchingService: host(p.matching),
			primitives.WorkerService:   host(p.wkr),
		}),
		temporal.WithLogger(logger),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dyn),
	}, nil
}

func buildConfig(p ports, db *dbConfig) *config.Config {
	var conf config.Config
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = internalIP

	conf.Persistence.DefaultStore = "default"
	conf.Persistence.VisibilityStore = "default"
	conf.Persistence.NumHistoryShards = db.shards
	conf.Persistence.DataStores = map[string]config.DataStore{"default": {SQL: db.sql}}
	if db.visibility != nil {
		conf.Persistence.VisibilityStore = "visibility"
		conf.Persistence.DataStores["visibility"] = config.DataStore{SQL: db.visibility}
	}

	conf.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             p.frontendAddr(),
				HTTPAddress:            net.JoinHostPort(dialHost(p.frontendIP), strconv.Itoa(p.httpAPI)),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"

	service := func(ip string, port int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: ip}}
	}
	frontend := service(p.frontendIP, p.frontend)
	frontend.RPC.HTTPPort = p.httpAPI
	conf.Services = map[string]config.Service{
		string(primitives.FrontendService): frontend,
		string(primitives.HistoryService):  service(internalIP, p.history),
		string(primitives.MatchingService): service(internalIP, p.matching),
		string(primitives.WorkerService):   service(internalIP, p.wkr),
	}

	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = p.frontendAddr()
	return &conf
}
