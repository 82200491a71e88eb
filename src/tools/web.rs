//! `web_fetch`: fetches an http(s) URL and returns its text, refusing private addresses (SSRF protection).
//!
//! Every hop's host is resolved once, every resolved address is checked, and the connection is pinned to the
//! checked addresses (`ClientBuilder::resolve_to_addrs`), so a DNS answer that changes between the check and the
//! connect (DNS rebinding) cannot reach a private address. Redirects are followed by hand, at most
//! [`MAX_REDIRECTS`], and each hop is checked again. Proxies are not used: a proxy would make its own
//! connection and bypass the check.

use std::error::Error as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use reqwest::{Client, Url, header, redirect};

use super::{Tool, ToolContext, ToolError, ToolFuture, args};
use super::{object_schema, truncate_chars};
use crate::config::WebConfig;
use crate::json::{Json, Object};

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;

/// The User-Agent header sent.
const USER_AGENT: &str = concat!("nanogate/", env!("CARGO_PKG_VERSION"));

/// `web_fetch` (nanobot's parameters: `url`, `maxChars`; `max_chars` is accepted too, `extractMode` ignored).
#[derive(Debug, Default, Clone)]
pub struct WebFetch {
    /// Addresses allowed even though they are private (for a known LAN host, or a test server).
    allowed: Vec<IpAddr>,
}

impl WebFetch {
    /// A fetcher that follows `tools.web.allow_private` alone.
    pub fn new() -> Self {
        Self::default()
    }

    /// A fetcher that also allows these exact addresses when `allow_private` is off.
    pub fn with_allowed_addrs(allowed: Vec<IpAddr>) -> Self {
        WebFetch { allowed }
    }
}

impl Tool for WebFetch {
    fn name(&self) -> &'static str {
        "web_fetch"
    }

    fn description(&self) -> &'static str {
        "Fetch a public http(s) URL and return its text (HTML is converted to plain text)."
    }

    fn parameters(&self) -> Json {
        object_schema(
            &[
                ("url", "string", "URL to fetch (http or https)"),
                (
                    "maxChars",
                    "integer",
                    "Maximum characters of text to return",
                ),
            ],
            &["url"],
        )
    }

    fn call<'a>(&'a self, args: &'a Object, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let raw = args::string(args, "url")?;
            let url = Url::parse(raw).map_err(|e| {
                ToolError::InvalidArguments(format!(
                    "`url` {raw:?} is not a valid URL ({e}); give an absolute http:// or https:// URL"
                ))
            })?;
            let cfg = &ctx.config.web;
            let asked = match args::opt_u64(args, "maxChars")? {
                Some(n) => Some(n),
                None => args::opt_u64(args, "max_chars")?,
            };
            let max_chars = asked.map_or(cfg.max_chars, |n| {
                usize::try_from(n).unwrap_or(usize::MAX).min(cfg.max_chars)
            });
            let secs = cfg.timeout_secs.max(1);
            let fetched = tokio::time::timeout(Duration::from_secs(secs), self.fetch(url, cfg))
                .await
                .map_err(|_| {
                    ToolError::Failed(format!(
                        "fetching {raw} timed out after {secs} s; try again later or another URL"
                    ))
                })??;
            render(&fetched, max_chars, cfg.max_bytes)
        })
    }
}

/// A response as read.
struct Fetched {
    url: Url,
    status: u16,
    content_type: String,
    body: Vec<u8>,
    /// The body was longer than `max_bytes` and was cut.
    cut: bool,
}

impl WebFetch {
    /// GETs `url`, following redirects by hand so every hop is checked.
    async fn fetch(&self, mut url: Url, cfg: &WebConfig) -> Result<Fetched, ToolError> {
        let mut redirects = 0;
        loop {
            let client = self.client_for(&url, cfg).await?;
            let mut response =
                client.get(url.clone()).send().await.map_err(|e| {
                    ToolError::Failed(format!("fetching {url} failed: {}", chain(&e)))
                })?;
            let location = response
                .status()
                .is_redirection()
                .then(|| response.headers().get(header::LOCATION))
                .flatten();
            if let Some(location) = location {
                redirects += 1;
                if redirects > MAX_REDIRECTS {
                    return Err(ToolError::Failed(format!(
                        "too many redirects (more than {MAX_REDIRECTS}) starting from the given URL; last was {url}"
                    )));
                }
                url = next_url(&url, location)?;
                continue;
            }
            let (body, cut) = read_body(&mut response, cfg.max_bytes, &url).await?;
            let content_type = response
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            return Ok(Fetched {
                status: response.status().as_u16(),
                url,
                content_type,
                body,
                cut,
            });
        }
    }

    /// A client for one hop: scheme checked, host resolved, every address checked, connection pinned to them.
    async fn client_for(&self, url: &Url, cfg: &WebConfig) -> Result<Client, ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::Failed(format!(
                "only http and https URLs can be fetched, not {}: ({url})",
                url.scheme()
            )));
        }
        let host = url
            .host_str()
            .ok_or_else(|| ToolError::Failed(format!("URL {url} has no host")))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let mut builder = Client::builder()
            .redirect(redirect::Policy::none())
            .no_proxy()
            .user_agent(USER_AGENT)
            .timeout(Duration::from_secs(cfg.timeout_secs.max(1)));
        // An IPv6 literal's host_str is bracketed: `[::1]`.
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.check(ip, host, cfg)?;
        } else {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
                .await
                .map_err(|e| ToolError::Failed(format!("cannot resolve host {host}: {e}")))?
                .collect();
            if addrs.is_empty() {
                return Err(ToolError::Failed(format!("host {host} has no addresses")));
            }
            for addr in &addrs {
                self.check(addr.ip(), host, cfg)?;
            }
            builder = builder.resolve_to_addrs(bare, &addrs);
        }
        builder
            .build()
            .map_err(|e| ToolError::Failed(format!("cannot build an HTTP client: {}", chain(&e))))
    }

    /// Refuses a non-public address unless private addresses are allowed (in general or this one).
    fn check(&self, ip: IpAddr, host: &str, cfg: &WebConfig) -> Result<(), ToolError> {
        if cfg.allow_private || is_public(ip) || self.allowed.contains(&ip) {
            return Ok(());
        }
        Err(ToolError::Failed(format!(
            "refusing to fetch {host}: it resolves to {ip}, a private, loopback, link-local or otherwise \
             non-public address (set tools.web.allow_private = true to allow this)"
        )))
    }
}

/// The target of a redirect, relative to the URL that redirected.
fn next_url(from: &Url, location: &header::HeaderValue) -> Result<Url, ToolError> {
    let location = location.to_str().map_err(|_| {
        ToolError::Failed(format!(
            "{from} redirected with a Location header that is not text"
        ))
    })?;
    from.join(location).map_err(|e| {
        ToolError::Failed(format!(
            "{from} redirected to an invalid URL {location:?}: {e}"
        ))
    })
}

/// At most `max_bytes` of the body, and whether more was there.
async fn read_body(
    response: &mut reqwest::Response,
    max_bytes: usize,
    url: &Url,
) -> Result<(Vec<u8>, bool), ToolError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        ToolError::Failed(format!(
            "reading the response from {url} failed: {}",
            chain(&e)
        ))
    })? {
        let room = max_bytes - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// The tool result: URL, status, then the text (HTML converted) capped at `max_chars`.
fn render(f: &Fetched, max_chars: usize, max_bytes: usize) -> Result<String, ToolError> {
    let head = &f.body[..f.body.len().min(1024)];
    if head.contains(&0) {
        return Err(ToolError::Failed(format!(
            "{} returned binary content ({}); web_fetch only returns text",
            f.url,
            if f.content_type.is_empty() {
                "no content type"
            } else {
                &f.content_type
            }
        )));
    }
    let raw = String::from_utf8_lossy(&f.body);
    let text = if is_html(&f.content_type, &raw) {
        // nanohtml2text ends lines with `\r\n`; the model only needs `\n`.
        nanohtml2text::html2text(&raw).replace("\r\n", "\n")
    } else {
        raw.into_owned()
    };
    let mut out = format!(
        "URL: {}\nStatus: {}\n\n{}",
        f.url,
        f.status,
        truncate_chars(text.trim(), max_chars, 0)
    );
    if f.cut {
        out.push_str(&format!(
            "\n(response cut after {max_bytes} bytes: tools.web.max_bytes)"
        ));
    }
    Ok(out)
}

/// HTML by content type, or by its first bytes when the type says nothing (as nanobot decides).
fn is_html(content_type: &str, body: &str) -> bool {
    if content_type.contains("html") {
        return true;
    }
    if content_type.contains("json") {
        return false;
    }
    let start: String = body.trim_start().chars().take(16).collect();
    let start = start.to_ascii_lowercase();
    start.starts_with("<!doctype") || start.starts_with("<html")
}

/// An error with its sources (reqwest's own message rarely says why, e.g. "connection refused").
fn chain(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// Whether `ip` is a public unicast address: not private, loopback, link-local, unspecified, CGNAT
/// (100.64/10), unique-local (fc00::/7), multicast, broadcast, reserved or documentation, nor an IPv6 form that
/// embeds such an IPv4 address (mapped, compatible, NAT64, 6to4).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let reserved = a == 0 // "this network", includes 0.0.0.0
        || a >= 240 // reserved and broadcast
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && (c == 0 || c == 2)) // IETF 192.0.0/24, TEST-NET-1
        || (a == 198 && (b == 18 || b == 19)) // benchmarking 198.18/15
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113); // TEST-NET-3
    !(reserved
        || ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_unspecified())
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    // ::/96 (unspecified, loopback, deprecated IPv4-compatible): none of it is routable.
    if s[..6] == [0; 6] {
        return false;
    }
    // NAT64 64:ff9b::/96 and 6to4 2002::/16 reach the embedded IPv4 address.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return is_public_v4(embedded(s[1], s[2]));
    }
    let unique_local = (s[0] & 0xfe00) == 0xfc00;
    let link_local = (s[0] & 0xffc0) == 0xfe80;
    let site_local = (s[0] & 0xffc0) == 0xfec0;
    let documentation = s[0] == 0x2001 && s[1] == 0x0db8;
    let discard = s[..4] == [0x100, 0, 0, 0];
    !(unique_local || link_local || site_local || documentation || discard || ip.is_multicast())
}
