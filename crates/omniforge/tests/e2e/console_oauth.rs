//! The console's sign-in through the issuer (issue 17): "Sign in with ISSUER", the real
//! authorization server's own sign-in and consent pages (`oidc-provider`, scripted with plain
//! HTTP as `support/py/oauth_client.py` does), the code exchanged with PKCE by a confidential
//! client, and a console session for the `oauth:` principal; a callback presented by another
//! browser, or presented twice, opens nothing.

use std::collections::BTreeMap;

use crate::support::{Setup, browser_client};

/// A browser's cookies and the one HTTP client it needs: redirects are followed by hand
/// (each hop is checked), cookies kept by name (both servers are on 127.0.0.1, which a
/// browser's jar would also share; the names do not clash).
struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
}

struct Page {
    status: u16,
    location: Option<String>,
    body: String,
    set_cookies: Vec<String>,
}

impl Browser {
    fn new() -> Browser {
        Browser {
            http: browser_client(),
            cookies: BTreeMap::new(),
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let jar: Vec<String> = self
            .cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let request = if jar.is_empty() {
            request
        } else {
            request.header("cookie", jar.join("; "))
        };
        let reply = request.send().await.unwrap();
        let set_cookies: Vec<String> = reply
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        for header in &set_cookies {
            let pair = header.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || header.contains("Max-Age=0") {
                self.cookies.remove(name.trim());
            } else {
                self.cookies.insert(name.trim().into(), value.into());
            }
        }
        Page {
            status: reply.status().as_u16(),
            location: reply
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_owned()),
            set_cookies,
            body: reply.text().await.unwrap(),
        }
    }

    async fn get(&mut self, url: &str) -> Page {
        let request = self.http.get(url);
        self.send(request).await
    }

    async fn post_form(&mut self, url: &str, origin: Option<&str>, form: &[(&str, &str)]) -> Page {
        let mut request = self.http.post(url).form(form);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        self.send(request).await
    }
}

/// The value of `name="NAME" value="…"` in a page.
fn field(html: &str, name: &str) -> Option<String> {
    let start = html.find(&format!("name=\"{name}\""))?;
    let rest = &html[start..];
    let value = rest.split("value=\"").nth(1)?.split('"').next()?;
    Some(value.replace("&amp;", "&"))
}

/// `url` resolved against `base`'s origin when it is a path.
fn absolute(base: &str, url: &str) -> String {
    if url.starts_with("http") {
        url.to_owned()
    } else {
        let origin: String = base.splitn(4, '/').take(3).collect::<Vec<_>>().join("/");
        format!("{origin}{url}")
    }
}

/// From the console's sign-in page to the issuer: "Sign in with ISSUER" posted with the
/// form's CSRF token. Returns the authorization request URL.
async fn start(browser: &mut Browser, base: &str, issuer: &str) -> String {
    let form = browser.get(&format!("{base}/console/sign-in")).await;
    assert_eq!(form.status, 200);
    assert!(
        form.body.contains(&format!("Sign in with {issuer}")),
        "{}",
        form.body
    );
    let csrf = field(&form.body, "csrf").expect("a CSRF field");
    let started = browser
        .post_form(
            &format!("{base}/console/oauth/start"),
            Some(base),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(started.status, 303, "{}", started.body);
    let binding = started
        .set_cookies
        .iter()
        .find(|c| c.starts_with("omniforge_console_login="))
        .expect("the binding cookie");
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/console/oauth"] {
        assert!(binding.contains(flag), "{binding}");
    }
    started.location.expect("a redirect to the issuer")
}

/// The issuer's own pages: sign in as `login`, consent; returns the redirect back (the
/// console's callback URL with `code` and `state`).
async fn at_the_issuer(browser: &mut Browser, authorize: &str, login: &str) -> String {
    let mut url = authorize.to_owned();
    let mut page = browser.get(&url).await;
    for _ in 0..20 {
        if let Some(location) = page.location.clone() {
            let next = absolute(&url, &location);
            if next.contains("/console/oauth/callback") {
                return next;
            }
            url = next;
            page = browser.get(&url).await;
            continue;
        }
        assert_eq!(page.status, 200, "at {url}: {}", page.body);
        let prompt = field(&page.body, "prompt")
            .unwrap_or_else(|| panic!("no form at {url}: {}", page.body));
        let action = page
            .body
            .split("action=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .replace("&amp;", "&");
        let mut form = vec![("prompt", prompt.clone())];
        match prompt.as_str() {
            "login" => {
                form.push(("login", login.to_owned()));
                form.push(("password", "any".to_owned()));
            }
            "consent" => {}
            other => panic!("unexpected prompt {other}"),
        }
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        url = absolute(&url, &action);
        page = browser.post_form(&url, None, &pairs).await;
    }
    panic!("the issuer did not send the browser back within 20 steps")
}

#[tokio::test]
async fn console_signs_in_through_the_issuers_own_pages() {
    crate::support::needs_deps!();
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("console-secret");
    std::fs::write(&secret, "console-web-secret\n").unwrap();
    let setup = Setup::start(
        &[],
        &[
            "--oauth-console-client-id",
            "console-web",
            "--oauth-console-client-secret-file",
            secret.to_str().unwrap(),
        ],
    )
    .await;
    let base = setup.url().trim_end_matches("/mcp").to_owned();
    let issuer = setup.provider.issuer.clone();

    // Someone signs in at the issuer in their own browser and hands the callback URL to
    // another (login CSRF): the other browser lacks the binding cookie, so nothing opens,
    // and the state is spent.
    let mut attacker = Browser::new();
    let authorize = start(&mut attacker, &base, &issuer).await;
    for (param, expected) in [
        ("response_type=code", true),
        ("code_challenge_method=S256", true),
        ("client_id=console-web", true),
        ("resource=", true),
        ("code_verifier", false),
    ] {
        assert_eq!(authorize.contains(param), expected, "{param}: {authorize}");
    }
    assert!(authorize.starts_with(&issuer), "{authorize}");
    let forged = at_the_issuer(&mut attacker, &authorize, "mallory").await;
    let mut victim = Browser::new();
    let _ = victim.get(&format!("{base}/console/sign-in")).await;
    let refused = victim.get(&forged).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        !refused
            .set_cookies
            .iter()
            .any(|c| c.starts_with("omniforge_console=")),
        "no session for a callback this browser did not start: {:?}",
        refused.set_cookies
    );
    let again = attacker.get(&forged).await;
    assert_eq!(again.status, 400, "a state opens once: {}", again.body);

    // The real sign-in: a fresh session (not the sign-in form's), for oauth:ISSUER|alice.
    let mut browser = Browser::new();
    let authorize = start(&mut browser, &base, &issuer).await;
    let anonymous = browser.cookies["omniforge_console"].clone();
    let callback = at_the_issuer(&mut browser, &authorize, "alice").await;
    let landed = browser.get(&callback).await;
    assert_eq!(landed.status, 200, "{}\n{}", landed.body, setup.logs());
    assert!(
        landed
            .body
            .contains(r#"<meta http-equiv="refresh" content="0;url=/console/tools">"#),
        "{}",
        landed.body
    );
    let session = browser.cookies["omniforge_console"].clone();
    assert_ne!(session, anonymous, "a fresh session id at sign-in");
    assert!(
        !browser.cookies.contains_key("omniforge_console_login"),
        "the binding cookie is cleared"
    );
    let principal = format!("oauth:{issuer}|alice");
    let server_page = browser.get(&format!("{base}/console/server")).await;
    assert_eq!(
        server_page.status, 200,
        "an admin page for the admin scope the issuer granted"
    );
    assert!(
        server_page.body.contains(&principal),
        "{}",
        server_page.body
    );
    // The sign-in form's session is over; the callback cannot be replayed.
    let mut old = Browser::new();
    old.cookies.insert("omniforge_console".into(), anonymous);
    let page = old.get(&format!("{base}/console/tools")).await;
    assert_eq!(page.status, 303, "the anonymous session opens nothing");
    let replay = browser.get(&callback).await;
    assert_eq!(replay.status, 400, "{}", replay.body);
}
