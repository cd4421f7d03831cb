package devserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/temporalio/ui-server/v2/server/api"
	"github.com/temporalio/ui-server/v2/server/auth"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"github.com/temporalio/ui-server/v2/server/cors"
	"github.com/temporalio/ui-server/v2/server/csrf"
	"github.com/temporalio/ui-server/v2/server/headers"
	"github.com/temporalio/ui-server/v2/server/route"
	"github.com/temporalio/ui-server/v2/ui"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
)

// uiServer serves the Temporal Web UI (the embedded assets of
// github.com/temporalio/ui-server) and its API proxy to the frontend.
//
// It is assembled from the ui-server packages the same way as
// uiserver.NewServer, but served by our own http.Server on our own listener:
// uiserver.Server.Start exits the process when it cannot listen, NewServer
// panics on bad config and Stop leaks the gRPC connection.
type uiServer struct {
	ln   net.Listener
	http *http.Server
	conn *grpc.ClientConn
	done chan struct{}
}

// listenUI reserves the UI port; serve starts answering on it.
func listenUI(ip string, port int) (*uiServer, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen for web ui: %w", err)
	}
	return &uiServer{ln: ln}, nil
}

func (u *uiServer) serve(frontendAddr, namespace string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("build web ui: panic: %v", r)
		}
	}()
	handler, err := u.handler(frontendAddr, namespace)
	if err != nil {
		return err
	}
	u.http = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	u.done = make(chan struct{})
	go func() {
		defer close(u.done)
		_ = u.http.Serve(u.ln) // returns http.ErrServerClosed on stop
	}()
	return nil
}

func (u *uiServer) handler(frontendAddr, namespace string) (http.Handler, error) {
	cfg := &uiconfig.Config{
		TemporalGRPCAddress: frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("web ui config: %w", err)
	}
	provider, err := uiconfig.NewConfigProviderWithRefresh(cfg) // no refresh: RefreshInterval is 0
	if err != nil {
		return nil, fmt.Errorf("web ui config: %w", err)
	}
	conn, err := api.CreateGRPCConnection(provider)
	if err != nil {
		return nil, fmt.Errorf("web ui connection to frontend: %w", err)
	}
	u.conn = conn

	const cookieSecure = false // plain http on a local port
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(middleware.Recover())
	e.Use(middleware.Gzip())
	e.Use(cors.CORSMiddleware(cors.CORSConfig{
		AllowHeaders: []string{
			echo.HeaderOrigin, echo.HeaderContentType, echo.HeaderAccept,
			echo.HeaderXCSRFToken, echo.HeaderAuthorization, auth.AuthorizationExtrasHeader,
			"Caller-Type",
		},
		AllowCredentials: true,
		ConfigProvider:   provider,
	}))
	e.Use(middleware.Secure())
	e.Use(csrf.EnsureTokenCookie(cookieSecure))
	e.Use(middleware.CSRFWithConfig(csrf.MiddlewareConfig(provider, cookieSecure)))

	route.SetHealthRoute(e)

	apiMiddleware := []api.Middleware{
		headers.WithForwardHeaders([]string{auth.AuthorizationExtrasHeader, "Caller-Type"}),
	}
	writeControl := route.DisableWriteMiddleware(provider)
	apiGroup := e.Group("/api/v1")
	apiGroup.GET("/settings", api.GetSettings(provider))
	apiGroup.GET(api.WorkflowRawHistoryUrl,
		api.WorkflowRawHistoryHandler(workflowservice.NewWorkflowServiceClient(conn)), writeControl)
	apiGroup.Match([]string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete},
		"/*", api.TemporalAPIHandler(provider, apiMiddleware, conn), writeControl)

	assets, err := ui.Assets()
	if err != nil {
		return nil, fmt.Errorf("web ui assets: %w", err)
	}
	if assets, err = fs.Sub(assets, "local"); err != nil {
		return nil, fmt.Errorf("web ui assets: %w", err)
	}
	if err := route.SetUIRoutes(e, "", assets); err != nil {
		return nil, fmt.Errorf("web ui routes: %w", err)
	}
	route.SetRenderRoute(e, "")
	return e, nil
}

func (u *uiServer) stop() error {
	var errs []error
	if u.http != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := u.http.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			_ = u.http.Close()
		}
		<-u.done
	} else if err := u.ln.Close(); err != nil {
		errs = append(errs, err)
	}
	if u.conn != nil {
		if err := u.conn.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
