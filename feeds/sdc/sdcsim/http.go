package sdcsim

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"
)

// httpService is one simulated restify service on its own 127.0.0.1 port.
type httpService struct {
	name string
	ln   net.Listener
	srv  *http.Server
	mux  *http.ServeMux
}

func (s *Sim) startHTTP(name string) (*httpService, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sdcsim: %s: listen: %w", name, err)
	}
	hs := &httpService{name: name, ln: ln, mux: http.NewServeMux()}
	hs.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, restError{
			Code: "ResourceNotFound", Message: r.URL.Path + " does not exist",
		})
	})
	hs.srv = &http.Server{
		Handler:           hs.mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	go func() {
		if err := hs.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("sdcsim: http server stopped", "service", name, "err", err)
		}
	}()
	return hs, nil
}

func (hs *httpService) url() string { return "http://" + hs.ln.Addr().String() }

// handle registers a GET (and HEAD) route: restify headers, request
// counting and fault injection wrap the handler.
func (s *Sim) handle(hs *httpService, pattern string, route Route, h http.HandlerFunc) {
	hs.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		reqID := r.Header.Get("x-request-id")
		if reqID == "" {
			reqID = newUUID()
		}
		w.Header().Set("x-request-id", reqID)
		w.Header().Set("x-server-name", hs.name)
		w = &timedWriter{ResponseWriter: w, start: start, now: s.now}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, http.StatusMethodNotAllowed, restError{
				Code: "MethodNotAllowed", Message: r.Method + " is not allowed",
			})
			return
		}
		f, hit := s.faults.take(route, route != RoutePing)
		if !hit {
			h(w, r)
			return
		}
		if !s.delay(r.Context(), f) {
			return
		}
		switch {
		case f.Status != 0:
			writeError(w, f.Status, faultError(f))
		case f.Malformed:
			rec := &recorder{header: http.Header{}, code: http.StatusOK}
			h(rec, r)
			for k, v := range rec.header {
				w.Header()[k] = v
			}
			body := rec.body.Bytes()
			cut := body[:len(body)/2]
			if len(cut) == 0 {
				cut = []byte(`{"`)
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(cut)))
			w.WriteHeader(rec.code)
			_, _ = w.Write(cut)
		default:
			h(w, r)
		}
	})
}

// timedWriter adds restify's x-response-time when the status is written.
// It unwraps for http.ResponseController and hijacks for the WebSocket
// upgrade.
type timedWriter struct {
	http.ResponseWriter
	start time.Time
	now   func() time.Time
	done  bool
}

func (t *timedWriter) WriteHeader(code int) {
	if !t.done {
		t.done = true
		t.Header().Set("x-response-time", strconv.FormatInt(t.now().Sub(t.start).Milliseconds(), 10))
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *timedWriter) Write(b []byte) (int, error) {
	if !t.done {
		t.WriteHeader(http.StatusOK)
	}
	return t.ResponseWriter.Write(b)
}

func (t *timedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (t *timedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(t.ResponseWriter).Hijack()
}

// recorder captures a handler's answer so that a Malformed fault can cut
// it (net/http/httptest's recorder would do, but would link httptest into
// the cns binary).
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// restError is a restify error body.
type restError struct {
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Errors  []fieldError `json:"errors,omitempty"`
}

type fieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func faultError(f Fault) restError {
	e := restError{Code: f.Code, Message: f.Message}
	if e.Code == "" {
		switch f.Status {
		case http.StatusServiceUnavailable:
			e.Code = "MorayBucketsNotSetup"
		case http.StatusConflict:
			e.Code = "ValidationFailed"
		case http.StatusNotFound:
			e.Code = "ResourceNotFound"
		case http.StatusUnprocessableEntity:
			e.Code = "InvalidParameters"
		case http.StatusBadRequest:
			e.Code = "BadRequest"
		default:
			e.Code = "InternalError"
		}
	}
	if e.Message == "" {
		switch e.Code {
		case "MorayBucketsNotSetup":
			e.Message = "Moray buckets are not setup"
		case "ValidationFailed":
			e.Message = "Invalid Parameters"
		case "ResourceNotFound":
			e.Message = "resource not found"
		case "InvalidParameters":
			e.Message = "Invalid parameters"
		default:
			e.Message = "injected fault"
		}
	}
	return e
}

func writeError(w http.ResponseWriter, status int, e restError) {
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"code":"InternalError","message":"sdcsim: cannot encode answer"}`)
	}
	writeBody(w, status, b)
}

func writeBody(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// newUUID returns a random version 4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
