//! The page's files, embedded in the binary (no build step, nothing fetched from the internet),
//! and the headers every response of the page carries.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/style.css");
/// The page's icon, and the picture of a unit whose icon the service does not have.
const ICON: &str = include_str!("assets/unit.svg");

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

/// `GET /favicon.ico`: browsers ask for it whatever the page says.
pub async fn favicon() -> Response {
    unit_icon_response()
}

/// `GET /unit.svg`.
pub async fn unit_icon() -> Response {
    unit_icon_response()
}

/// The page's own unit picture, cached by the browser for a day.
pub fn unit_icon_response() -> Response {
    ([(header::CONTENT_TYPE, "image/svg+xml"), (header::CACHE_CONTROL, "max-age=86400")], ICON).into_response()
}

/// The headers every answer carries (the listener's own `503` too): scripts, styles and
/// pictures only from the bridge itself (no inline script, so text from the service can never
/// run as code even if it reached the HTML), no framing by other sites, no content sniffing, no
/// referrer.
pub const SECURITY_HEADERS: [(&str, &str); 4] = [
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
         frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
];

/// Adds [`SECURITY_HEADERS`] to an answer.
pub async fn security_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    for (name, value) in SECURITY_HEADERS {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}
