package api

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ctxflow/ctxflow/convo"
)

// webAssets holds the page: plain HTML, CSS and JavaScript modules, served as
// they are (no build step). One module per panel under web/panels/.
//
//go:embed web
var webAssets embed.FS

// webTypes are the content types of the page's assets, fixed here rather
// than read from the host's mime tables (a module script served with any
// other type is refused by browsers).
var webTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".json": "application/json",
}

// webRoutes registers the web page: GET / is the page, GET /ui/<file> its
// assets. They need no API key (they hold no data); the page sends the key
// the user enters with its /v1 calls.
func (s *Server) webRoutes(r *gin.Engine) {
	page := func(c *gin.Context) { serveAsset(c, "index.html") }
	asset := func(c *gin.Context) { serveAsset(c, strings.TrimPrefix(c.Param("file"), "/")) }
	r.GET("/", page)
	r.HEAD("/", page)
	r.GET("/ui/*file", asset)
	r.HEAD("/ui/*file", asset)
}

// webModTime is when this process started: the assets' modification time, for
// conditional requests.
var webModTime = time.Now()

func serveAsset(c *gin.Context, name string) {
	typ, known := webTypes[path.Ext(name)]
	if !fs.ValidPath(name) || !known {
		writeError(c, errNotFound("no asset %q", convo.Clip(name, 80)))
		return
	}
	data, err := webAssets.ReadFile("web/" + name)
	if err != nil {
		writeError(c, errNotFound("no asset %q", convo.Clip(name, 80)))
		return
	}
	c.Header("Content-Type", typ)
	// Revalidate every time: a new binary serves new assets at once.
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Content-Type-Options", "nosniff")
	http.ServeContent(c.Writer, c.Request, name, webModTime, bytes.NewReader(data))
}
