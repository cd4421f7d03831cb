package sqltools

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// checker asks SQLite itself what a statement is, before it runs: on a
// read-only connection of its own, with an authorizer, it prepares the
// statement (never steps it) and refuses
//   - anything but exactly one statement: the rest after the first (the
//     tail) must prepare to nothing, blanks and comments alone;
//   - anything but a query that reads: the authorizer allows selecting,
//     reading tables and calling functions, and denies every other action
//     (PRAGMA, ATTACH, CREATE, temp objects, transactions, writes);
//   - the list of the database's files (pragma_database_list): the tools
//     never show a path.
//
// So no statement of a task can change the connections the tools share
// among tenants, and nothing rests on matching the statement's text.
type checker struct {
	mu  sync.Mutex
	tls *libc.TLS
	db  uintptr
}

func openChecker(path string) (*checker, error) {
	tls := libc.NewTLS()
	c := &checker{tls: tls}
	name, err := libc.CString("file:" + path + "?mode=ro")
	if err != nil {
		tls.Close()
		return nil, err
	}
	defer libc.Xfree(tls, name)
	pdb := libc.Xmalloc(tls, uint64(unsafe.Sizeof(uintptr(0))))
	if pdb == 0 {
		tls.Close()
		return nil, fmt.Errorf("check statements: out of memory")
	}
	defer libc.Xfree(tls, pdb)
	rc := sqlite3.Xsqlite3_open_v2(tls, name, pdb, sqlite3.SQLITE_OPEN_READONLY|sqlite3.SQLITE_OPEN_URI, 0)
	c.db = peek(pdb)
	if rc != sqlite3.SQLITE_OK {
		err := fmt.Errorf("check statements: open %s: %s", path, c.errmsg())
		c.close()
		return nil, err
	}
	sqlite3.Xsqlite3_limit(tls, c.db, sqlite3.SQLITE_LIMIT_ATTACHED, 0)
	sqlite3.Xsqlite3_busy_timeout(tls, c.db, busyTimeoutMS) // a locked database is waited for, as by the queries
	sqlite3.Xsqlite3_set_authorizer(tls, c.db, cFuncPointer(authorize), 0)
	return c, nil
}

// authorize is SQLite's authorizer callback (sqlite3_set_authorizer).
func authorize(tls *libc.TLS, _ uintptr, action int32, z1, z2, _, _ uintptr) int32 {
	switch action {
	case sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE:
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_READ:
		if libc.GoString(z1) == "pragma_database_list" {
			return sqlite3.SQLITE_DENY
		}
		return sqlite3.SQLITE_OK
	case sqlite3.SQLITE_FUNCTION:
		if libc.GoString(z2) == "load_extension" {
			return sqlite3.SQLITE_DENY
		}
		return sqlite3.SQLITE_OK
	}
	return sqlite3.SQLITE_DENY
}

// cFuncPointer is a Go function as the C pointer SQLite calls (the
// representation of go.dev/s/go11func, as modernc.org/sqlite does it).
// Only for functions declared at the top level.
func cFuncPointer[T any](f T) uintptr {
	return *(*uintptr)(unsafe.Pointer(&struct{ f T }{f}))
}

// check returns nil for exactly one statement that only reads, else an
// error wrapping ErrStatement that says why.
func (c *checker) check(statement string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db == 0 {
		return fmt.Errorf("check statements: closed")
	}
	z, err := libc.CString(statement)
	if err != nil {
		return err
	}
	defer libc.Xfree(c.tls, z)
	stmt, tail, err := c.prepare(z)
	if err != nil {
		return err
	}
	if stmt == 0 {
		return fmt.Errorf("%w: the statement is empty", ErrStatement)
	}
	sqlite3.Xsqlite3_finalize(c.tls, stmt)
	switch next, _, err := c.prepare(tail); {
	case err != nil && !errors.Is(err, ErrStatement):
		return err
	case err != nil || next != 0:
		sqlite3.Xsqlite3_finalize(c.tls, next)
		return fmt.Errorf("%w: one statement at a time: there is more after the first", ErrStatement)
	}
	return nil
}

// prepare prepares the first statement of the C string z and returns it
// (0 for none) and where the rest starts. A statement SQLite refuses is an
// error wrapping ErrStatement; the database busy, locked or unreadable is
// not (the query is tried again, as one whose run meets it).
func (c *checker) prepare(z uintptr) (stmt, tail uintptr, err error) {
	out := libc.Xmalloc(c.tls, 2*uint64(unsafe.Sizeof(uintptr(0))))
	if out == 0 {
		return 0, 0, fmt.Errorf("check statements: out of memory")
	}
	defer libc.Xfree(c.tls, out)
	pTail := out + unsafe.Sizeof(uintptr(0))
	switch rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, z, -1, out, pTail); rc & 0xff {
	case sqlite3.SQLITE_OK:
		return peek(out), peek(pTail), nil
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM:
		return 0, 0, fmt.Errorf("check statement: %s", c.errmsg())
	default:
		return 0, 0, fmt.Errorf("%w: %s", ErrStatement, c.errmsg())
	}
}

// peek reads the pointer stored at p, in SQLite's (C) memory.
func peek(p uintptr) uintptr { return *(*uintptr)(unsafe.Add(nil, p)) }

func (c *checker) errmsg() string {
	return libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
}

func (c *checker) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.db != 0 {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.db = 0
	}
	if c.tls != nil {
		c.tls.Close()
		c.tls = nil
	}
}
