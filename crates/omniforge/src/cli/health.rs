//! `health`: one GET of the local server's `/healthz`, for a container's HEALTHCHECK (the
//! image has no curl). Exit 0 on a 200, else an error (exit 1) that says what went wrong.

use std::time::Duration;

use anyhow::{Context, Result, bail};

/// `health`: GET `url`, giving up after `timeout`. Prints nothing on success.
///
/// # Errors
/// The server cannot be reached in time, or answers anything but 200.
pub(super) async fn check(url: &str, timeout: Duration) -> Result<()> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        // A local check: a proxy in the environment must not answer for the server.
        .no_proxy()
        .build()
        .context("building the HTTP client")?;
    let response = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status();
    if status != reqwest::StatusCode::OK {
        bail!("GET {url}: {status}");
    }
    Ok(())
}
