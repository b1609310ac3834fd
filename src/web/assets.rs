//! The page's files, embedded in the binary (no build step, nothing fetched from the internet),
//! and the headers every response of the page carries.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");

/// Served with every file: the page is small and changes with the binary.
const NO_CACHE: &str = "no-cache";

fn file(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, NO_CACHE)], body).into_response()
}

/// `GET /`.
pub async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX)
}

/// `GET /app.js`.
pub async fn script() -> Response {
    file("text/javascript; charset=utf-8", SCRIPT)
}

/// `GET /style.css`.
pub async fn style() -> Response {
    file("text/css; charset=utf-8", STYLE)
}

/// Adds the page's security headers: scripts, styles and pictures only from the bridge itself
/// (no inline script, so text from the service can never run as code even if it reached the
/// HTML), no framing by other sites, no content sniffing, no referrer.
pub async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
             frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
