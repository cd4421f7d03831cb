package api

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// openAPISpec is the OpenAPI 3.1 document of every /v1 route. Tests keep it
// true: every route Handler registers is in it, and real answers of every
// route validate against it.
//
//go:embed openapi.json
var openAPISpec []byte

// openAPIRoutes registers GET /v1/openapi.json.
func (s *Server) openAPIRoutes(v1 *gin.RouterGroup) {
	v1.GET("/openapi.json", func(c *gin.Context) {
		c.Header("Cache-Control", "no-cache")
		c.Data(http.StatusOK, "application/json", openAPISpec)
	})
}
