// Package static holds the files the browser loads as they are: the Tailwind CSS built from
// views/input.css, the vendored htmx 2 and htmx-ext-sse scripts, and app.js. `make generate`
// rebuilds css/ and the vendored js/ files; they are committed, so building and running the server
// needs neither npm nor the network.
package static

import "embed"

// FS holds css/app.css, js/htmx.min.js, js/sse.js and js/app.js, with paths relative to this
// directory. Serve it under /static/.
//
//go:embed css js
var FS embed.FS
