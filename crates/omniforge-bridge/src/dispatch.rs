//! Dispatch of one manifest tool call to its Connect service, over the Connect unary
//! protocol with JSON (`POST <upstream><procedure>`, `Connect-Protocol-Version: 1`).
//!
//! The answer is one of three [`Outcome`]s: the reply message, a Connect error envelope
//! (`code`, `message`, `details`), or a failure that never reached a Connect answer
//! (connection refused, timeout, an HTML error page, invalid JSON, a redirect, a body over the
//! size cap). The server crate turns each into an MCP result.
//!
//! An upstream is trusted with requests, not with the server's resources: its response body is
//! read chunk by chunk and abandoned as soon as it would pass
//! [`UpstreamConfig::max_response_bytes`] (or declares a larger `Content-Length`), so at most
//! the cap is ever buffered; and redirects are never followed (a 3xx is a failure that names
//! the status and the `Location`), so a call cannot be sent somewhere the operator did not
//! configure.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION};
use serde_json::{Map, Value};

use crate::manifest::ManifestTool;

/// The longest upstream body excerpt put into an error text, in bytes.
const EXCERPT_BYTES: usize = 200;

/// Default for [`UpstreamConfig::max_response_bytes`]: 16 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 16 << 20;

/// How to reach one Connect service.
#[derive(Debug, Clone)]
pub struct UpstreamConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080`; empty means "not configured".
    pub base_url: String,
    /// Sent verbatim as `Authorization` on every call, when set.
    pub auth_header: Option<String>,
    /// Per-call timeout, covering the whole call (connect, request, the response body); also
    /// sent as `Connect-Timeout-Ms`.
    pub timeout: Duration,
    /// Extra headers sent on every call.
    pub headers: Vec<(String, String)>,
    /// The largest response body accepted, in bytes. A response that declares a larger
    /// `Content-Length`, or streams more, is abandoned as soon as that is known (never
    /// buffered past the cap) and the call fails with a message that names the limit.
    /// Default [`DEFAULT_MAX_RESPONSE_BYTES`] (16 MiB).
    pub max_response_bytes: u64,
}

/// A configured upstream with its pooled HTTP client (keep-alive, HTTP/1.1 and HTTP/2 where
/// offered, rustls for https).
#[derive(Debug, Clone)]
pub struct Upstream {
    base_url: String,
    /// The base URL's user information with its `@` (`user:password@`), if it has any: cut
    /// from every failure text, so credentials in a URL never reach a result or a log.
    userinfo: Option<String>,
    timeout: Duration,
    headers: HeaderMap,
    max_response_bytes: u64,
    client: reqwest::Client,
}

/// An upstream that cannot be configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// An extra header or the auth header is not a valid HTTP header.
    #[error("invalid header {name:?}: {reason}")]
    Header {
        /// The header name.
        name: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The base URL is not an http(s) URL.
    #[error("invalid upstream URL {0:?}: it must start with http:// or https://")]
    Url(String),
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// What one call came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A 200 with a JSON body: the reply message.
    Reply(Value),
    /// A Connect error envelope.
    ConnectError {
        /// The Connect code, e.g. `unauthenticated`.
        code: String,
        /// The error message.
        message: String,
        /// The `details` array, as sent.
        details: Vec<Value>,
    },
    /// Anything else, described for the caller (no secrets, a short excerpt at most).
    Failure(String),
}

fn header(name: &str, value: &str) -> Result<(HeaderName, HeaderValue), UpstreamError> {
    let err = |reason: String| UpstreamError::Header {
        name: name.to_owned(),
        reason,
    };
    let name_parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|e| err(e.to_string()))?;
    let value = HeaderValue::from_str(value).map_err(|e| err(e.to_string()))?;
    Ok((name_parsed, value))
}

impl Upstream {
    /// Builds the upstream and its HTTP client (redirects disabled).
    ///
    /// # Errors
    /// [`UpstreamError::Url`] for a base URL that is neither empty nor `http(s)://`;
    /// [`UpstreamError::Header`] for an extra header or auth header that is not valid HTTP;
    /// [`UpstreamError::Client`] if the HTTP client cannot be built.
    pub fn new(config: &UpstreamConfig) -> Result<Upstream, UpstreamError> {
        let base_url = config.base_url.trim_end_matches('/').to_owned();
        if !(base_url.is_empty()
            || base_url.starts_with("http://")
            || base_url.starts_with("https://"))
        {
            return Err(UpstreamError::Url(config.base_url.clone()));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let (name, value) = header(name, value)?;
            headers.insert(name, value);
        }
        if let Some(auth) = &config.auth_header {
            let (_, mut value) = header("authorization", auth)?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let client = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(90))
            .tcp_nodelay(true)
            // A redirect is answered as a failure, never followed: following one would send the
            // call (as a GET, with our headers) wherever the upstream points.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(UpstreamError::Client)?;
        // The URL's own parts, as reqwest writes them into its errors.
        let userinfo = reqwest::Url::parse(&base_url)
            .ok()
            .filter(|url| !url.username().is_empty() || url.password().is_some())
            .map(|url| match url.password() {
                Some(password) => format!("{}:{password}@", url.username()),
                None => format!("{}@", url.username()),
            });
        Ok(Upstream {
            base_url,
            userinfo,
            timeout: config.timeout,
            headers,
            max_response_bytes: config.max_response_bytes,
            client,
        })
    }

    /// Whether a base URL is configured.
    pub fn is_configured(&self) -> bool {
        !self.base_url.is_empty()
    }

    /// Calls `tool` with `arguments` as the request message. Dropping the future aborts the
    /// upstream request (cancellation). Never fails as a Rust error: every problem is an
    /// [`Outcome::Failure`] described for the caller.
    pub async fn call(&self, tool: &ManifestTool, arguments: &Map<String, Value>) -> Outcome {
        self.call_with_headers(tool, arguments, &[]).await
    }

    /// [`Upstream::call`] with extra request headers, e.g. the W3C `traceparent` of the
    /// caller's span (configured upstream headers come first; these are added after them).
    pub async fn call_with_headers(
        &self,
        tool: &ManifestTool,
        arguments: &Map<String, Value>,
        extra: &[(String, String)],
    ) -> Outcome {
        match (self.send(tool, arguments, extra).await, &self.userinfo) {
            (Outcome::Failure(text), Some(userinfo)) => {
                Outcome::Failure(text.replace(userinfo.as_str(), ""))
            }
            (outcome, _) => outcome,
        }
    }

    async fn send(
        &self,
        tool: &ManifestTool,
        arguments: &Map<String, Value>,
        extra: &[(String, String)],
    ) -> Outcome {
        if !self.is_configured() {
            return Outcome::Failure(format!(
                "no upstream address is configured for tool {}: start OmniForge with --upstream URL \
                 (`omniforge bridge --addr URL`), or set `upstream` in the manifest's config entry",
                tool.name
            ));
        }
        let url = format!("{}{}", self.base_url, tool.procedure);
        let mut request = self
            .client
            .post(&url)
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header("connect-protocol-version", "1")
            .header("connect-timeout-ms", self.timeout.as_millis().to_string())
            .timeout(self.timeout)
            .body(Value::Object(arguments.clone()).to_string());
        if tool.idempotency_key {
            request = request.header("idempotency-key", uuid::Uuid::new_v4().to_string());
        }
        for (name, value) in extra {
            request = request.header(name.as_str(), value.as_str());
        }
        let response = match request.send().await {
            Ok(response) => response,
            Err(e) => return Outcome::Failure(describe_send_error(&e, &url, self.timeout)),
        };
        let status = response.status();
        if status.is_redirection() {
            return Outcome::Failure(describe_redirect(&response, &url));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = match read_capped(response, self.max_response_bytes).await {
            Ok(body) => body,
            Err(BodyError::Read(e)) => {
                return Outcome::Failure(describe_send_error(&e, &url, self.timeout));
            }
            Err(BodyError::TooLarge { declared }) => {
                return Outcome::Failure(format!(
                    "upstream response from {url} is larger than this upstream's limit of {} \
                     (max_response_bytes){}; the response was abandoned",
                    describe_bytes(self.max_response_bytes),
                    declared
                        .map(|n| format!(": it declared {}", describe_bytes(n)))
                        .unwrap_or_default()
                ));
            }
        };
        let json: Option<Value> = serde_json::from_slice(&body).ok();
        if status.is_success() {
            return match json {
                Some(value) => Outcome::Reply(value),
                None => Outcome::Failure(format!(
                    "upstream answered HTTP {} with a body that is not JSON ({content_type}): {}",
                    status.as_u16(),
                    excerpt(&body)
                )),
            };
        }
        match json
            .as_ref()
            .and_then(|v| v.get("code"))
            .and_then(Value::as_str)
        {
            Some(code) => {
                let value = json.as_ref().unwrap_or(&Value::Null);
                Outcome::ConnectError {
                    code: code.to_owned(),
                    message: value
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    details: value
                        .get("details")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                }
            }
            None => Outcome::Failure(format!(
                "upstream answered HTTP {} {}{}",
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                if body.is_empty() {
                    String::new()
                } else {
                    format!(": {}", excerpt(&body))
                }
            )),
        }
    }
}

/// Why a response body was not read whole.
enum BodyError {
    /// Past the cap; `declared` is the `Content-Length` when that alone was too large.
    TooLarge { declared: Option<u64> },
    /// The connection failed or timed out while reading.
    Read(reqwest::Error),
}

/// Reads the body chunk by chunk, holding at most `max_bytes`: a declared length over the cap
/// fails before reading, and the chunk that would pass it fails without being kept. Returning
/// drops the response, which closes the connection rather than draining it.
async fn read_capped(
    mut response: reqwest::Response,
    max_bytes: u64,
) -> Result<Vec<u8>, BodyError> {
    let declared = response.content_length();
    if declared.is_some_and(|n| n > max_bytes) {
        return Err(BodyError::TooLarge { declared });
    }
    // Trust a declared length for the first allocation only up to 1 MiB.
    let first = declared.unwrap_or(0).min(max_bytes).min(1 << 20);
    let mut body = Vec::with_capacity(usize::try_from(first).unwrap_or(0));
    while let Some(chunk) = response.chunk().await.map_err(BodyError::Read)? {
        let total = u64::try_from(body.len() + chunk.len()).unwrap_or(u64::MAX);
        if total > max_bytes {
            return Err(BodyError::TooLarge { declared: None });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A byte count for people: `16 MiB (16777216 bytes)`, or `1000 bytes`.
fn describe_bytes(n: u64) -> String {
    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;
    if n >= MIB && n.is_multiple_of(MIB) {
        format!("{} MiB ({n} bytes)", n / MIB)
    } else if n >= KIB && n.is_multiple_of(KIB) {
        format!("{} KiB ({n} bytes)", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// A 3xx answer, which is never followed: names the status and where it pointed.
fn describe_redirect(response: &reqwest::Response, url: &str) -> String {
    let status = response.status();
    let location = response
        .headers()
        .get(LOCATION)
        .map(|v| excerpt(v.as_bytes()));
    format!(
        "upstream answered HTTP {} {} to {url}{}; redirects are not followed: configure the \
         upstream's final address",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        match location {
            Some(location) => format!(" with Location: {location}"),
            None => " without a Location".to_owned(),
        }
    )
}

fn describe_send_error(e: &reqwest::Error, url: &str, timeout: Duration) -> String {
    if e.is_timeout() {
        format!(
            "upstream did not answer within {} ms ({url})",
            timeout.as_millis()
        )
    } else if e.is_connect() {
        format!("cannot connect to the upstream at {url}: connection refused or unreachable")
    } else {
        // Without the URL's query or credentials: the error text carries the URL only.
        format!("upstream request to {url} failed: {e}")
    }
}

/// The first bytes of a body, as text on one line.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(EXCERPT_BYTES)]);
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if body.len() > EXCERPT_BYTES {
        format!("{one_line}…")
    } else {
        one_line
    }
}

/// Fills the proto3 zero values Connect's JSON leaves out, where `schema` gives the field's
/// type: `0` for integer/number, `""` for string, `false` for boolean, `[]` for array.
/// Recurses into nested object schemas that are present. Only `required` fields are filled:
/// an optional field may legitimately be absent.
pub fn fill_zero_values(schema: &Map<String, Value>, value: &mut Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    if let (Some(properties), Some(required)) = (properties, required) {
        for name in required.iter().filter_map(Value::as_str) {
            if object.contains_key(name) {
                continue;
            }
            let zero = properties
                .get(name)
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str)
                .and_then(|t| match t {
                    "integer" | "number" => Some(Value::from(0)),
                    "string" => Some(Value::from("")),
                    "boolean" => Some(Value::from(false)),
                    "array" => Some(Value::Array(Vec::new())),
                    _ => None,
                });
            if let Some(zero) = zero {
                object.insert(name.to_owned(), zero);
            }
        }
    }
    if let Some(properties) = properties {
        for (name, sub_schema) in properties {
            if let (Some(sub_schema), Some(sub_value)) =
                (sub_schema.as_object(), object.get_mut(name))
            {
                fill_zero_values(sub_schema, sub_value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_required_zero_values_only() {
        let schema = json!({"type":"object","required":["text","n","ok","items","nested"],"properties":{
            "text":{"type":"string"},"n":{"type":"integer"},"ok":{"type":"boolean"},
            "items":{"type":"array"},"opt":{"type":"string"},
            "nested":{"type":"object","required":["x"],"properties":{"x":{"type":"number"}}}}});
        let mut value = json!({"nested": {}});
        fill_zero_values(schema.as_object().unwrap(), &mut value);
        assert_eq!(
            value,
            json!({"text":"","n":0,"ok":false,"items":[],"nested":{"x":0}})
        );
    }

    #[test]
    fn excerpts_are_short_and_on_one_line() {
        let body = format!("<html>\n<body>{}</body></html>", "x".repeat(500));
        let e = excerpt(body.as_bytes());
        assert!(
            e.len() < 220 && !e.contains('\n') && e.ends_with('…'),
            "{e}"
        );
    }

    #[tokio::test]
    async fn empty_upstream_is_a_clear_configuration_error() {
        let upstream = Upstream::new(&UpstreamConfig {
            base_url: String::new(),
            auth_header: None,
            timeout: Duration::from_secs(1),
            headers: Vec::new(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
        .unwrap();
        let tool: ManifestTool = serde_json::from_value(
            json!({"name":"t","inputSchema":{"type":"object"},"procedure":"/a.B/C"}),
        )
        .unwrap();
        let Outcome::Failure(text) = upstream.call(&tool, &Map::new()).await else {
            panic!()
        };
        assert!(
            text.contains("no upstream address is configured") && text.contains("--upstream"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn connection_refused_is_described() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let upstream = Upstream::new(&UpstreamConfig {
            base_url: format!("http://user:pw-in-url@127.0.0.1:{port}"),
            auth_header: Some("Bearer secret".into()),
            timeout: Duration::from_secs(2),
            headers: Vec::new(),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        })
        .unwrap();
        let tool: ManifestTool = serde_json::from_value(
            json!({"name":"t","inputSchema":{"type":"object"},"procedure":"/a.B/C"}),
        )
        .unwrap();
        let Outcome::Failure(text) = upstream.call(&tool, &Map::new()).await else {
            panic!()
        };
        assert!(
            text.contains("cannot connect")
                && text.contains(&format!("http://127.0.0.1:{port}/a.B/C"))
                && !text.contains("secret")
                && !text.contains("pw-in-url"),
            "{text}"
        );
    }
}
