//! The web console's security rules (issue 17), in-process through `Server::app()` with a real
//! SQLite store: security headers on every answer, the session cookie's flags and its fresh
//! id at sign-in, no login CSRF, the cookie never opening `/mcp`, the CSRF token and Origin
//! check on every change, agent-written text escaped, and what each scope sees and may do.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt;
use omniforge_script::SandboxLevel;
use omniforge_server::{
    ConsoleClient, HttpSettings, ManifestConfig, OAuth, OAuthSettings, SchemaProfile,
    ScriptSettings, Server, Settings, StoreSettings, TokenSet, UpstreamConfig,
};
use omniforge_store::digest::arguments_digest;
use omniforge_store::{
    Actor, Annotations, CallLog, CallOutcome, CallRecord, CallSource, CapturedText, Engine,
    Keyring, Limits, NewStatus, NewVersion, Runtime, SecretStore, SqliteStore, StoreConfig,
    ToolStore,
};
use omniforge_store::{
    ContentStore, NewPrompt, NewResource, NewTemplate, PromptArgumentSpec, ResourceBody,
    TemplateBody, WriteMode,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const TOKENS: &str =
    "admin adm-token admin\nwriter wri-token tools:write\ncaller cal-token tools:call\n";
const HOST: &str = "127.0.0.1:8080";
const ORIGIN: &str = "http://127.0.0.1:8080";
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";
/// Agent-written text that would run or inject markup if it reached a page unescaped.
const HOSTILE: &str =
    r#"<script>document.body.dataset.xss=1</script><img src=x onerror="alert(1)">"'"#;

struct Fixture {
    app: Router,
    store: Arc<Engine>,
    _server: Server,
    _dir: tempfile::TempDir,
}

fn version(description: &str, author: &str) -> NewVersion {
    NewVersion {
        title: None,
        description: description.into(),
        input_schema: json!({"type": "object", "properties": {"q": {"type": "string", "description": HOSTILE}}})
            .as_object()
            .cloned()
            .unwrap(),
        output_schema: None,
        annotations: Annotations::default(),
        runtime: Runtime::Python,
        code: format!("print({HOSTILE:?})"),
        dependencies: vec![],
        limits: Limits {
            timeout_ms: 10_000,
            memory_bytes: 256 << 20,
            network: false,
        },
        lock: String::new(),
        env_id: "env-none".into(),
        secrets: vec!["API_KEY".into()],
        author: author.into(),
        examples: Vec::new(),
        execution: Default::default(),
    }
}

/// A server (`--require-approval`) whose store holds tool `hostile` (versions 1 and 2 live, 3
/// pending, all by `token:writer`), a secret `API_KEY` and one logged call each of
/// `token:caller` and `token:writer`.
async fn fixture() -> Fixture {
    fixture_with(|_| Vec::new()).await
}

/// [`fixture`] with the manifests `manifests` writes into the fixture's directory.
async fn fixture_with(manifests: impl FnOnce(&Path) -> Vec<ManifestConfig>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let manifests = manifests(dir.path());
    let config = StoreConfig {
        busy_timeout: omniforge_store::DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: omniforge_store::DEFAULT_CALL_LOG_MAX_ROWS,
        max_readers: omniforge_store::DEFAULT_MAX_READERS,
        change_log_max_rows: omniforge_store::DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: omniforge_store::DEFAULT_CALL_STATS_MAX_AGE,
        keyring: Some(Keyring::generate_file(&dir.path().join("secret.key")).unwrap()),
    };
    let store = Arc::new(
        SqliteStore::open_with(dir.path().join("omniforge.db"), &config)
            .await
            .unwrap(),
    );
    let actor = Actor::new("token:writer");
    store
        .create_tool(
            &actor,
            "hostile",
            version(HOSTILE, "token:writer"),
            NewStatus::Live,
        )
        .await
        .unwrap();
    store
        .add_version(
            &actor,
            "hostile",
            version("second", "token:writer"),
            NewStatus::Live,
        )
        .await
        .unwrap();
    store
        .add_version(
            &actor,
            "hostile",
            version("third, pending", "token:writer"),
            NewStatus::Pending,
        )
        .await
        .unwrap();
    store
        .set_secret(
            &Actor::new("token:admin"),
            "API_KEY",
            "value-never-shown-4711",
        )
        .await
        .unwrap();
    for principal in ["token:caller", "token:writer"] {
        store
            .record_call(CallRecord {
                tool: "hostile".into(),
                source: CallSource::Stored,
                version: Some(2),
                started_at_ms: 1_764_600_000_000,
                duration_ms: 12,
                outcome: CallOutcome::Ok,
                bytes_out: 2,
                principal: Some(principal.into()),
                error: None,
                arguments: Some(arguments_digest(&json!({"q": principal}))),
                arguments_text: Some(CapturedText::new(format!("{{\"q\": \"{principal}\"}}"))),
                result_text: Some(CapturedText::new(HOSTILE)),
            })
            .await
            .unwrap();
    }
    // Content with agent-written descriptions, for the resources and prompts page.
    store
        .put_resource(
            &actor,
            NewResource {
                uri: "docs://hostile".into(),
                name: "hostile-doc".into(),
                title: None,
                description: Some(HOSTILE.into()),
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text("body".into()),
            },
            WriteMode::Create,
        )
        .await
        .unwrap();
    store
        .put_template(
            &actor,
            NewTemplate {
                uri_template: "docs://pages/{page}".into(),
                name: "hostile-pages".into(),
                title: None,
                description: Some(HOSTILE.into()),
                mime_type: None,
                body: TemplateBody::Text("page {page}".into()),
                completions: Default::default(),
                completion_script: None,
            },
            WriteMode::Create,
        )
        .await
        .unwrap();
    store
        .put_prompt(
            &actor,
            NewPrompt {
                name: "hostile-prompt".into(),
                title: None,
                description: Some(HOSTILE.into()),
                arguments: vec![PromptArgumentSpec {
                    name: "topic".into(),
                    title: None,
                    description: Some(HOSTILE.into()),
                    required: true,
                    values: Default::default(),
                }],
                messages: vec![
                    json!({"role": "user", "content": {"type": "text", "text": "about {topic}"}}),
                ],
                script: None,
                completion_script: None,
            },
            WriteMode::Create,
        )
        .await
        .unwrap();
    let server = Server::start(Settings {
        page_size: 1000,
        schema_profile: SchemaProfile::AsAuthored,
        manifests,
        inline_schema_refs: false,
        metrics_max_tools: omniforge_server::DEFAULT_METRICS_MAX_TOOLS,
        metrics: true,
        store: Some(StoreSettings {
            store: store.clone(),
            scripts: ScriptSettings {
                data_dir: dir.path().to_owned(),
                python: "python3".into(),
                uv: None,
                allow_source_builds: false,
                sandbox: SandboxLevel::Off,
                default_timeout: Duration::from_secs(30),
                max_timeout: Duration::from_secs(600),
                memory_bytes: 512 << 20,
                host: omniforge_script::HostEnv::from_vars(std::env::vars_os()),
                disabled_layers: Vec::new(),
                warm_pool: 0,
                warm_idle: Duration::from_secs(600),
            },
            authoring: true,
            max_result_bytes: 64 * 1024,
            output_ttl: Duration::from_secs(3600),
            audit_retention: None,
            keep_failed_drafts: false,
            require_approval: true,
            tasks: omniforge_server::TaskSettings::default(),
            call_log: omniforge_server::CallLogSettings::default(),
            request_state_keys: Vec::new(),
        }),
    })
    .await
    .unwrap();
    let app = server.app(http_settings(None), CancellationToken::new());
    Fixture {
        app,
        store,
        _server: server,
        _dir: dir,
    }
}

/// The HTTP settings of the fixture's app (with `oauth`, if given).
fn http_settings(oauth: Option<Arc<OAuth>>) -> HttpSettings {
    HttpSettings {
        path: "/mcp".into(),
        stateless: false,
        allowed_origins: vec!["https://app.example.com".into()],
        allowed_hosts: Vec::new(),
        check_host: true,
        tokens: TokenSet::parse(TOKENS).unwrap(),
        oauth,
        max_body_bytes: 64 * 1024,
        session_idle_timeout: Duration::from_secs(300),
        max_sessions: 1000,
        header_read_timeout: Duration::from_secs(30),
        keep_alive_timeout: Duration::from_secs(75),
        max_connections: 1024,
    }
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut request = Request::get(path).header("host", HOST);
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("omniforge_console={cookie}"));
    }
    request.body(Body::empty()).unwrap()
}

/// A form POST; `headers` are added (or override the defaults: the console's Origin and a
/// form body type).
fn post(
    path: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
    headers: &[(&str, &str)],
) -> Request<Body> {
    let mut request = Request::post(path).header("host", HOST);
    let mut set = vec![
        ("origin", ORIGIN),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    for (k, v) in headers {
        set.retain(|(name, _)| name != k);
        set.push((k, v));
    }
    for (k, v) in set.into_iter().filter(|(_, v)| !v.is_empty()) {
        request = request.header(k, v);
    }
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("omniforge_console={cookie}"));
    }
    let body = serde_urlencoded::to_string(form).unwrap();
    request.body(Body::from(body)).unwrap()
}

/// The session cookie's value in a `Set-Cookie`, and the whole header.
fn set_cookie(headers: &HeaderMap) -> (String, String) {
    let header = headers["set-cookie"].to_str().unwrap().to_owned();
    let value = header
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned();
    (value, header)
}

/// The CSRF token a page's forms carry.
fn csrf(body: &str) -> String {
    let at = body
        .find(r#"name="csrf" value=""#)
        .expect("a form with a CSRF token")
        + r#"name="csrf" value=""#.len();
    body[at..].split('"').next().unwrap().to_owned()
}

/// Signs in with `token`; returns the session cookie and its CSRF token.
async fn sign_in(app: &Router, token: &str) -> (String, String) {
    let form = send(app, get("/console/sign-in", None)).await;
    assert_eq!(form.status, StatusCode::OK);
    let (anonymous, _) = set_cookie(&form.headers);
    let signed = send(
        app,
        post(
            "/console/sign-in",
            Some(&anonymous),
            &[("csrf", &csrf(&form.body)), ("token", token)],
            &[],
        ),
    )
    .await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER, "{}", signed.body);
    let (cookie, _) = set_cookie(&signed.headers);
    let page = send(app, get("/console/tools", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    (cookie, csrf(&page.body))
}

async fn current_version(store: &Engine) -> Option<u32> {
    store
        .tool("hostile")
        .await
        .unwrap()
        .unwrap()
        .current_version
}

#[tokio::test]
async fn every_console_answer_carries_the_csp_and_frame_headers() {
    let f = fixture().await;
    let (cookie, _) = sign_in(&f.app, "adm-token").await;
    let css = send(&f.app, get("/console/tools", Some(&cookie)))
        .await
        .body;
    let css_path = css
        .split("href=\"/console/assets/")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    let answers = [
        send(&f.app, get("/console/sign-in", None)).await,
        send(&f.app, get("/console/tools", None)).await,
        send(&f.app, get("/console/tools", Some(&cookie))).await,
        send(&f.app, get("/console/tools/hostile", Some(&cookie))).await,
        send(&f.app, get("/console/tools/no-such-tool", Some(&cookie))).await,
        send(&f.app, get("/console/no-such-page", Some(&cookie))).await,
        send(&f.app, get(&format!("/console/assets/{css_path}"), None)).await,
        send(
            &f.app,
            post(
                "/console/tools/hostile/rollback",
                Some(&cookie),
                &[("version", "1")],
                &[],
            ),
        )
        .await,
    ];
    let statuses: Vec<u16> = answers.iter().map(|a| a.status.as_u16()).collect();
    assert_eq!(statuses, [200, 303, 200, 200, 404, 404, 200, 403]);
    for a in &answers {
        assert_eq!(a.headers["content-security-policy"], CSP, "{:?}", a.status);
        assert_eq!(a.headers["x-frame-options"], "DENY");
        assert_eq!(a.headers["x-content-type-options"], "nosniff");
    }
    // Paths outside the console are not the console's.
    let outside = send(&f.app, get("/not-the-console", None)).await;
    assert_eq!(outside.status, StatusCode::NOT_FOUND);
    assert!(!outside.headers.contains_key("content-security-policy"));
    // Pages are not cached; the content-hashed stylesheet is, for good.
    assert_eq!(answers[2].headers["cache-control"], "no-store");
    assert_eq!(
        answers[6].headers["cache-control"],
        "public, max-age=31536000, immutable"
    );
    // No page carries a script, inline or not.
    assert!(!answers[3].body.contains("<script"));
}

#[tokio::test]
async fn sign_in_issues_a_fresh_httponly_samesite_strict_session() {
    let f = fixture().await;
    let form = send(&f.app, get("/console/sign-in", None)).await;
    let (anonymous, header) = set_cookie(&form.headers);
    assert_eq!(
        header,
        format!("omniforge_console={anonymous}; Path=/console; HttpOnly; SameSite=Strict")
    );
    // A wrong token: 401 and no session.
    let wrong = send(
        &f.app,
        post(
            "/console/sign-in",
            Some(&anonymous),
            &[("csrf", &csrf(&form.body)), ("token", "nope")],
            &[],
        ),
    )
    .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED);
    assert!(!wrong.headers.contains_key("set-cookie"));
    let signed = send(
        &f.app,
        post(
            "/console/sign-in",
            Some(&anonymous),
            &[("csrf", &csrf(&form.body)), ("token", "wri-token")],
            &[],
        ),
    )
    .await;
    assert_eq!(signed.status, StatusCode::SEE_OTHER);
    let (session, header) = set_cookie(&signed.headers);
    assert_ne!(session, anonymous, "sign-in must issue a new session id");
    assert!(
        header.contains("HttpOnly")
            && header.contains("SameSite=Strict")
            && !header.contains("Secure")
    );
    // The id from before sign-in opens nothing afterwards.
    let old = send(&f.app, get("/console/tools", Some(&anonymous))).await;
    assert_eq!(old.status, StatusCode::SEE_OTHER);
    assert_eq!(old.headers["location"], "/console/sign-in");
    let page = send(&f.app, get("/console/tools", Some(&session))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("token:writer"));
    // Over TLS (a proxy says so), the cookie is Secure and bound to the origin.
    let mut tls = get("/console/sign-in", None);
    tls.headers_mut()
        .insert("x-forwarded-proto", "https".parse().unwrap());
    let tls = send(&f.app, tls).await;
    let (_, header) = set_cookie(&tls.headers);
    assert!(header.starts_with("__Host-omniforge_console="), "{header}");
    assert!(
        header.ends_with("; Path=/; HttpOnly; SameSite=Strict; Secure"),
        "{header}"
    );
}

#[tokio::test]
async fn a_sign_in_without_the_forms_own_session_and_token_is_refused() {
    let f = fixture().await;
    // A cross-site page posting a valid token (login CSRF) has neither the anonymous session
    // nor its CSRF token.
    let forged = send(
        &f.app,
        post("/console/sign-in", None, &[("token", "adm-token")], &[]),
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    assert!(!forged.headers.contains_key("set-cookie"));
    let form = send(&f.app, get("/console/sign-in", None)).await;
    let (anonymous, _) = set_cookie(&form.headers);
    let other = send(&f.app, get("/console/sign-in", None)).await;
    let forged = send(
        &f.app,
        post(
            "/console/sign-in",
            Some(&anonymous),
            &[("csrf", &csrf(&other.body)), ("token", "adm-token")],
            &[],
        ),
    )
    .await;
    assert_eq!(
        forged.status,
        StatusCode::FORBIDDEN,
        "another session's CSRF token"
    );
    let forged = send(
        &f.app,
        post(
            "/console/sign-in",
            Some(&anonymous),
            &[("csrf", &csrf(&form.body)), ("token", "adm-token")],
            &[("origin", "https://evil.example")],
        ),
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN, "a foreign Origin");
    assert!(!forged.headers.contains_key("set-cookie"));
}

#[tokio::test]
async fn the_console_cookie_never_opens_mcp() {
    let f = fixture().await;
    let (cookie, _) = sign_in(&f.app, "adm-token").await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let request = Request::post("/mcp")
        .header("host", HOST)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("cookie", format!("omniforge_console={cookie}"))
        .body(Body::from(initialize.to_string()))
        .unwrap();
    assert_eq!(send(&f.app, request).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn every_change_needs_the_sessions_csrf_token_and_an_allowed_origin() {
    let f = fixture().await;
    let (cookie, token) = sign_in(&f.app, "adm-token").await;
    let (_, other_token) = sign_in(&f.app, "wri-token").await;
    let path = "/console/tools/hostile/rollback";
    let refused = [
        (
            vec![("version", "1")],
            vec![],
            StatusCode::FORBIDDEN,
            "no CSRF token",
        ),
        (
            vec![("csrf", "made-up"), ("version", "1")],
            vec![],
            StatusCode::FORBIDDEN,
            "a made-up token",
        ),
        (
            vec![("csrf", other_token.as_str()), ("version", "1")],
            vec![],
            StatusCode::FORBIDDEN,
            "another session's token",
        ),
        (
            vec![("csrf", token.as_str()), ("version", "1")],
            vec![("origin", "https://evil.example")],
            StatusCode::FORBIDDEN,
            "a foreign Origin",
        ),
        (
            vec![("csrf", token.as_str()), ("version", "1")],
            vec![("origin", "")],
            StatusCode::FORBIDDEN,
            "no Origin",
        ),
        (
            vec![("csrf", token.as_str()), ("version", "1")],
            vec![("origin", "null")],
            StatusCode::FORBIDDEN,
            "Origin null",
        ),
        (
            vec![("csrf", token.as_str()), ("version", "1")],
            vec![("sec-fetch-site", "cross-site")],
            StatusCode::FORBIDDEN,
            "cross-site Fetch Metadata",
        ),
        (
            vec![("csrf", token.as_str()), ("version", "1")],
            vec![("content-type", "application/json")],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "not a form",
        ),
    ];
    for (form, headers, status, why) in refused {
        let answer = send(&f.app, post(path, Some(&cookie), &form, &headers)).await;
        assert_eq!(answer.status, status, "{why}: {}", answer.body);
        assert_eq!(
            current_version(&f.store).await,
            Some(2),
            "{why} changed the tool"
        );
    }
    // With its token, from the console's own origin (or a listed one), the change is made.
    let answer = send(
        &f.app,
        post(
            path,
            Some(&cookie),
            &[("csrf", &token), ("version", "1")],
            &[("origin", "https://app.example.com")],
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(current_version(&f.store).await, Some(1));
    let page = send(&f.app, get("/console/tools/hostile", Some(&cookie))).await;
    assert!(
        page.body.contains("now runs version 1"),
        "the outcome is shown: {}",
        page.body
    );
}

#[tokio::test]
async fn agent_written_text_is_escaped_on_every_page() {
    let f = fixture().await;
    let (cookie, _) = sign_in(&f.app, "adm-token").await;
    let calls = send(&f.app, get("/console/calls", Some(&cookie))).await;
    let first_call = calls
        .body
        .split("href=\"/console/calls/")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_owned();
    for path in [
        "/console/tools".to_owned(),
        "/console/tools?q=%3Cscript%3E".to_owned(),
        "/console/tools/hostile".to_owned(),
        "/console/tools/hostile?version=1".to_owned(),
        "/console/tools/hostile?from=1&to=2".to_owned(),
        format!("/console/calls/{first_call}"),
        "/console/audit".to_owned(),
        "/console/server".to_owned(),
        "/console/content".to_owned(),
    ] {
        let page = send(&f.app, get(&path, Some(&cookie))).await;
        assert_eq!(page.status, StatusCode::OK, "{path}");
        assert!(
            !page.body.contains("<script"),
            "{path}: an unescaped script"
        );
        assert!(!page.body.contains("<img"), "{path}: an unescaped image");
        assert!(
            !page.body.contains("onerror=\""),
            "{path}: an unescaped attribute"
        );
    }
    let tool = send(
        &f.app,
        get("/console/tools/hostile?version=1", Some(&cookie)),
    )
    .await
    .body;
    assert!(
        tool.contains("&lt;script&gt;document.body.dataset.xss=1&lt;/script&gt;"),
        "the text is shown, escaped"
    );
    let diff = send(
        &f.app,
        get("/console/tools/hostile?from=1&to=2", Some(&cookie)),
    )
    .await
    .body;
    assert!(
        diff.contains("Version 1 → version 2") && diff.contains("second"),
        "{diff}"
    );
}

#[tokio::test]
async fn each_scope_sees_and_does_only_what_its_token_may() {
    let f = fixture().await;
    // tools:write: no audit log, no secrets, no grants.
    let (writer, writer_csrf) = sign_in(&f.app, "wri-token").await;
    assert_eq!(
        send(&f.app, get("/console/audit", Some(&writer)))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        send(&f.app, get("/console/secrets", Some(&writer)))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let grant = [
        ("csrf", writer_csrf.as_str()),
        ("secret", "API_KEY"),
        ("tool", "hostile"),
        ("version", "2"),
    ];
    let answer = send(
        &f.app,
        post("/console/secrets/grant", Some(&writer), &grant, &[]),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert!(
        f.store.grants(None, None).await.unwrap().is_empty(),
        "a writer granted a secret"
    );
    let tools = send(&f.app, get("/console/tools", Some(&writer)))
        .await
        .body;
    assert!(!tools.contains("/console/audit") && !tools.contains("/console/secrets"));
    // tools:call: the tool's schema and its own calls, no code, no versions, no changes.
    let (caller, caller_csrf) = sign_in(&f.app, "cal-token").await;
    let page = send(&f.app, get("/console/tools/hostile", Some(&caller)))
        .await
        .body;
    assert!(page.contains("Input schema"));
    assert!(
        !page.contains("Roll back") && !page.contains("print("),
        "{page}"
    );
    assert!(
        page.contains("token:caller") && !page.contains("token:writer"),
        "only its own calls"
    );
    assert!(
        !page.contains("id=\"activity\""),
        "the hourly charts count everyone's calls"
    );
    let rollback = [("csrf", caller_csrf.as_str()), ("version", "1")];
    let answer = send(
        &f.app,
        post(
            "/console/tools/hostile/rollback",
            Some(&caller),
            &rollback,
            &[],
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(current_version(&f.store).await, Some(2));
    let calls = send(&f.app, get("/console/calls", Some(&caller)))
        .await
        .body;
    assert!(calls.contains("token:caller") && !calls.contains("token:writer"));
    let admin_calls = {
        let (admin, _) = sign_in(&f.app, "adm-token").await;
        send(&f.app, get("/console/calls", Some(&admin))).await.body
    };
    let writers_call = admin_calls
        .split("href=\"/console/calls/")
        .skip(1)
        .map(|s| s.split('"').next().unwrap().to_owned())
        .find(|id| {
            let id: u64 = id.parse().unwrap();
            // Newest first: the writer's call was recorded second.
            id == 2
        })
        .unwrap();
    let answer = send(
        &f.app,
        get(&format!("/console/calls/{writers_call}"), Some(&caller)),
    )
    .await;
    assert_eq!(
        answer.status,
        StatusCode::NOT_FOUND,
        "another principal's call"
    );
    // The admin grants the request; the secret's value appears on no page.
    let (admin, admin_csrf) = sign_in(&f.app, "adm-token").await;
    let tool = send(&f.app, get("/console/tools/hostile", Some(&admin)))
        .await
        .body;
    assert!(
        tool.contains("id=\"activity\"")
            && tool.contains("No calls of hostile in the last 24 hours."),
        "{tool}"
    );
    let secrets = send(&f.app, get("/console/secrets", Some(&admin)))
        .await
        .body;
    assert!(
        secrets.contains("Grant API_KEY to hostile version 2"),
        "{secrets}"
    );
    let grant = [
        ("csrf", admin_csrf.as_str()),
        ("secret", "API_KEY"),
        ("tool", "hostile"),
        ("version", "2"),
    ];
    let answer = send(
        &f.app,
        post("/console/secrets/grant", Some(&admin), &grant, &[]),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(f.store.grants(None, None).await.unwrap().len(), 1);
    for path in [
        "/console/secrets",
        "/console/tools/hostile",
        "/console/audit",
        "/console/calls",
        "/console/tools",
    ] {
        let page = send(&f.app, get(path, Some(&admin))).await.body;
        assert!(
            !page.contains("value-never-shown-4711"),
            "{path} shows a secret value"
        );
    }
}

async fn status_of(store: &Engine, number: u32) -> String {
    store
        .version("hostile", number)
        .await
        .unwrap()
        .state
        .status
        .to_string()
}

#[tokio::test]
async fn only_admins_review_approve_and_reject_pending_versions() {
    let f = fixture().await;
    let (writer, writer_csrf) = sign_in(&f.app, "wri-token").await;
    // The author sees its pending version on the tool page, not the approvals.
    let page = send(&f.app, get("/console/tools/hostile", Some(&writer)))
        .await
        .body;
    assert!(
        page.contains("third, pending") || page.contains("Version 3"),
        "{page}"
    );
    for path in ["/console/approvals", "/console/approvals/hostile/3"] {
        assert_eq!(
            send(&f.app, get(path, Some(&writer))).await.status,
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }
    let form = [("csrf", writer_csrf.as_str()), ("grant", "API_KEY")];
    let answer = send(
        &f.app,
        post(
            "/console/approvals/hostile/3/approve",
            Some(&writer),
            &form,
            &[],
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(
        status_of(&f.store, 3).await,
        "pending",
        "a writer approved its own version"
    );
    // The caller does not even see the pending version.
    let (caller, _) = sign_in(&f.app, "cal-token").await;
    let page = send(&f.app, get("/console/tools/hostile", Some(&caller)))
        .await
        .body;
    assert!(!page.contains("third, pending"));
    // The admin reviews: the diff against the current version, one tick box per secret.
    let (admin, admin_csrf) = sign_in(&f.app, "adm-token").await;
    let list = send(&f.app, get("/console/approvals", Some(&admin)))
        .await
        .body;
    assert!(list.contains("Review hostile version 3"), "{list}");
    let review = send(&f.app, get("/console/approvals/hostile/3", Some(&admin)))
        .await
        .body;
    assert!(review.contains("Version 2 → version 3"), "{review}");
    assert!(
        review.contains(r#"name="grant" value="API_KEY""#),
        "{review}"
    );
    // Without a reason, a rejection is refused and changes nothing.
    let form = [("csrf", admin_csrf.as_str()), ("reason", " ")];
    let answer = send(
        &f.app,
        post(
            "/console/approvals/hostile/3/reject",
            Some(&admin),
            &form,
            &[],
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert_eq!(status_of(&f.store, 3).await, "pending");
    // Approved with nothing ticked: live, and no grant made.
    let form = [("csrf", admin_csrf.as_str())];
    let answer = send(
        &f.app,
        post(
            "/console/approvals/hostile/3/approve",
            Some(&admin),
            &form,
            &[],
        ),
    )
    .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(status_of(&f.store, 3).await, "live");
    assert_eq!(current_version(&f.store).await, Some(3));
    assert!(
        f.store.grants(None, None).await.unwrap().is_empty(),
        "an unticked secret was granted"
    );
    let list = send(&f.app, get("/console/approvals", Some(&admin)))
        .await
        .body;
    assert!(
        list.contains("Approved version 3 of tool hostile") && list.contains("Nothing waits"),
        "{list}"
    );
}

#[tokio::test]
async fn the_console_sits_behind_the_host_check() {
    let f = fixture().await;
    // DNS rebinding: a page of another name resolving to this loopback server.
    let request = Request::get("/console/sign-in")
        .header("host", "rebound.example:8080")
        .body(Body::empty())
        .unwrap();
    let answer = send(&f.app, request).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(!answer.headers.contains_key("set-cookie"));
}

/// The calls of `tool` by `principal` in the call log, once at least `least` are there (a
/// built-in's row is written off the answer's path).
async fn logged_calls(store: &Engine, tool: &str, principal: &str, least: usize) -> usize {
    let filter = omniforge_store::CallFilter {
        tool: Some(tool.into()),
        source: None,
        principal: Some(principal.into()),
        before_id: None,
        limit: 100,
    };
    for _ in 0..100 {
        let n = store.calls(&filter).await.unwrap().len();
        if n >= least {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    store.calls(&filter).await.unwrap().len()
}

#[tokio::test]
async fn the_try_it_form_calls_the_tool_as_the_viewer_like_a_client() {
    let f = fixture().await;
    let (cookie, token) = sign_in(&f.app, "cal-token").await;
    let page = send(
        &f.app,
        get("/console/tools/omniforge_instructions", Some(&cookie)),
    )
    .await;
    assert!(
        page.body
            .contains(r#"action="/console/tools/omniforge_instructions/try""#),
        "{}",
        page.body
    );
    let try_it = |tool: &str, form: Vec<(&'static str, String)>, csrf: bool| {
        let mut form: Vec<(&str, String)> = form;
        if csrf {
            form.push(("csrf", token.clone()));
        }
        let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post(
            &format!("/console/tools/{tool}/try"),
            Some(&cookie),
            &pairs,
            &[],
        )
    };
    // The result as a client gets it, called as the viewer (the call log says who).
    let ran = send(
        &f.app,
        try_it(
            "omniforge_instructions",
            vec![("arguments", String::new())],
            true,
        ),
    )
    .await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    assert!(ran.body.contains("Result of call to"), "{}", ran.body);
    assert!(ran.body.contains("isError: false"), "{}", ran.body);
    assert!(ran.body.contains("omniforge_create_tool"), "{}", ran.body);
    assert_eq!(
        logged_calls(&f.store, "omniforge_instructions", "token:caller", 1).await,
        1
    );
    // The inputSchema is checked as for a client (no additional properties), and what the
    // error says about the arguments is escaped.
    let bad = send(
        &f.app,
        try_it(
            "omniforge_instructions",
            vec![("arguments", format!("{{{:?}: 1}}", "<script>x</script>"))],
            true,
        ),
    )
    .await;
    assert_eq!(bad.status, StatusCode::OK);
    assert!(bad.body.contains("isError: true"), "{}", bad.body);
    assert!(!bad.body.contains("<script>x"), "{}", bad.body);
    // A form that is not JSON is refused before any call.
    let not_json = send(
        &f.app,
        try_it(
            "omniforge_instructions",
            vec![("arguments", "{".into())],
            true,
        ),
    )
    .await;
    assert!(not_json.body.contains("The arguments are not JSON"));
    // A tool above the viewer's scope is not there for them, as over MCP.
    let refused = send(
        &f.app,
        try_it(
            "omniforge_set_secret",
            vec![("arg.name", "NEW_ONE".into()), ("arg.value", "x".into())],
            true,
        ),
    )
    .await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert!(
        !f.store
            .secret_names()
            .await
            .unwrap()
            .contains(&"NEW_ONE".to_owned())
    );
    // Like every change: no CSRF token, no call.
    let forged = send(
        &f.app,
        try_it(
            "omniforge_instructions",
            vec![("arguments", String::new())],
            false,
        ),
    )
    .await;
    assert_eq!(forged.status, StatusCode::FORBIDDEN);
    // Two calls so far (the refused ones made none); a third one after them is the third row.
    send(
        &f.app,
        try_it(
            "omniforge_instructions",
            vec![("arguments", String::new())],
            true,
        ),
    )
    .await;
    assert_eq!(
        logged_calls(&f.store, "omniforge_instructions", "token:caller", 3).await,
        3
    );
    // The calls count in the tool-call metrics as a client's do (two ok, one refused by the
    // inputSchema); the refused forms, which made no call, do not.
    let scrape = Request::get("/metrics")
        .header("host", HOST)
        .header("authorization", "Bearer adm-token")
        .body(Body::empty())
        .unwrap();
    let metrics = send(&f.app, scrape).await;
    assert_eq!(metrics.status, StatusCode::OK, "{}", metrics.body);
    let counted = |outcome: &str| {
        let series = format!(
            r#"omniforge_tool_calls_total{{tool="omniforge_instructions",source="builtin",outcome="{outcome}"}} "#
        );
        metrics
            .body
            .lines()
            .find_map(|l| l.strip_prefix(series.as_str()))
            .unwrap_or("none")
            .to_owned()
    };
    assert_eq!(counted("ok"), "2", "{}", metrics.body);
    assert_eq!(counted("tool_error"), "1", "{}", metrics.body);
}

#[tokio::test]
async fn the_server_page_is_for_admins_and_charts_all_tools_calls() {
    let f = fixture().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // One call of a stored tool and one of a built-in: the chart counts both.
    for (tool, source, version) in [
        ("hostile", CallSource::Stored, Some(2)),
        ("omniforge_list_tools", CallSource::BuiltIn, None),
    ] {
        f.store
            .record_call(CallRecord {
                tool: tool.into(),
                source,
                version,
                started_at_ms: now - 60_000,
                duration_ms: 7,
                outcome: CallOutcome::Ok,
                bytes_out: 2,
                principal: Some("token:caller".into()),
                error: None,
                arguments: None,
                arguments_text: None,
                result_text: None,
            })
            .await
            .unwrap();
    }
    // tools:write and tools:call: refused as on the audit page, and no link to it.
    for token in ["wri-token", "cal-token"] {
        let (cookie, _) = sign_in(&f.app, token).await;
        assert_eq!(
            send(&f.app, get("/console/server", Some(&cookie)))
                .await
                .status,
            StatusCode::NOT_FOUND,
            "{token}"
        );
        let tools = send(&f.app, get("/console/tools", Some(&cookie)))
            .await
            .body;
        assert!(!tools.contains("/console/server"), "{token}");
    }
    let (admin, _) = sign_in(&f.app, "adm-token").await;
    let tools = send(&f.app, get("/console/tools", Some(&admin))).await.body;
    assert!(
        tools.contains("href=\"/console/server\""),
        "linked for admins"
    );
    let page = send(&f.app, get("/console/server", Some(&admin))).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Sandbox layers"), "{}", page.body);
    assert!(page.body.contains("Live sessions"), "{}", page.body);
    assert!(
        page.body
            .contains("Calls per hour of all tools, last 24 hours")
            && page.body.contains("2 calls, 0 of them errors"),
        "the chart counts every tool's calls: {}",
        page.body
    );
}

#[tokio::test]
async fn every_viewer_sees_the_resources_and_prompts_a_client_would_list() {
    let f = fixture().await;
    for token in ["cal-token", "wri-token", "adm-token"] {
        let (cookie, _) = sign_in(&f.app, token).await;
        let tools = send(&f.app, get("/console/tools", Some(&cookie)))
            .await
            .body;
        assert!(
            tools.contains("href=\"/console/content\""),
            "{token}: linked"
        );
        let page = send(&f.app, get("/console/content", Some(&cookie))).await;
        assert_eq!(page.status, StatusCode::OK, "{token}");
        for listed in [
            "docs://hostile",
            "docs://pages/{page}",
            "hostile-prompt",
            "topic",
        ] {
            assert!(
                page.body.contains(listed),
                "{token}: {listed}: {}",
                page.body
            );
        }
        assert!(
            page.body
                .matches("&lt;script&gt;document.body.dataset.xss=1&lt;/script&gt;")
                .count()
                >= 3,
            "{token}: each description shown, escaped: {}",
            page.body
        );
        assert!(!page.body.contains("<script"), "{token}: unescaped");
        assert!(
            !page
                .body
                .contains("method=\"post\" action=\"/console/content"),
            "read-only"
        );
    }
    assert_eq!(
        send(&f.app, get("/console/content", None)).await.status,
        StatusCode::SEE_OTHER,
        "signed out: to the sign-in form"
    );
}

/// A forge manifest with tools `PREFIX_ok` (`/p.v1.S/Ok`) and `PREFIX_refused`
/// (`/p.v1.S/Refused`) at `path`, served by `base_url`.
fn manifest(path: &Path, base_url: &str, prefix: &str) -> ManifestConfig {
    let tools: Vec<_> = [("ok", "Ok"), ("refused", "Refused")]
        .into_iter()
        .map(|(name, method)| {
            let name = format!("{prefix}_{name}");
            json!({"name": name, "description": name, "inputSchema": {"type": "object"},
                   "service": "p.v1.S", "method": method, "procedure": format!("/p.v1.S/{method}")})
        })
        .collect();
    std::fs::write(path, json!({"project": "p", "tools": tools}).to_string()).unwrap();
    ManifestConfig {
        path: path.to_owned(),
        upstream: UpstreamConfig {
            base_url: base_url.into(),
            auth_header: None,
            timeout: Duration::from_secs(10),
            headers: Vec::new(),
            max_response_bytes: omniforge_server::DEFAULT_MAX_RESPONSE_BYTES,
        },
        task_support: Default::default(),
    }
}

/// A Connect service over HTTP+JSON on a free port: `/p.v1.S/Ok` replies `{"n": 1}`, every
/// other procedure answers the Connect error `permission_denied`.
async fn connect_service() -> String {
    let app = axum::Router::new().fallback(|uri: http::Uri| async move {
        if uri.path() == "/p.v1.S/Ok" {
            (StatusCode::OK, axum::Json(json!({"n": 1})))
        } else {
            (
                StatusCode::FORBIDDEN,
                axum::Json(json!({"code": "permission_denied", "message": "no"})),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// Runs `tool` with no arguments from its try-it form (the body of `tools/call`, as the
/// viewer); returns the result page.
async fn try_tool(app: &Router, cookie: &str, tool: &str) -> String {
    let page = send(app, get(&format!("/console/tools/{tool}"), Some(cookie))).await;
    let token = csrf(&page.body);
    let form = [("arguments", ""), ("csrf", token.as_str())];
    let ran = send(
        app,
        post(
            &format!("/console/tools/{tool}/try"),
            Some(cookie),
            &form,
            &[],
        ),
    )
    .await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    ran.body
}

#[tokio::test]
async fn the_server_page_shows_environments_upstreams_and_the_warm_pool() {
    let service = connect_service().await;
    // A port nothing listens on: its calls get no answer.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://user:pw-never-shown@{}", l.local_addr().unwrap())
    };
    let f = fixture_with(|dir| {
        vec![
            manifest(&dir.join("answering.json"), &service, "a"),
            manifest(&dir.join("silent.json"), &closed, "s"),
        ]
    })
    .await;
    // Environments on disk: the fixture's tool uses `env-none`; `orphan` is used by nothing.
    let envs = f._dir.path().join("envs");
    std::fs::create_dir_all(envs.join("env-none/lib")).unwrap();
    std::fs::write(envs.join("env-none/lib/a.py"), vec![b'x'; 4096]).unwrap();
    std::fs::write(envs.join("env-none/.omniforge-env"), b"").unwrap();
    std::fs::create_dir_all(envs.join("orphan")).unwrap();
    std::fs::write(envs.join("orphan/b"), vec![b'x'; 1024]).unwrap();

    let (admin, _) = sign_in(&f.app, "adm-token").await;
    let before = send(&f.app, get("/console/server", Some(&admin))).await;
    assert_eq!(before.status, StatusCode::OK);
    assert!(
        before.body.matches("no calls yet").count() == 2,
        "two upstreams, no calls: {}",
        before.body
    );
    // Calls as a client makes them (the try-it form runs the body of tools/call): a reply, then a Connect error, from the
    // answering service; no answer from the silent one.
    let ok = try_tool(&f.app, &admin, "a_ok").await;
    assert!(ok.contains("isError: false"), "{ok}");
    let refused = try_tool(&f.app, &admin, "a_refused").await;
    assert!(refused.contains("permission_denied"), "{refused}");
    let silent = try_tool(&f.app, &admin, "s_ok").await;
    assert!(silent.contains("isError: true"), "{silent}");
    let page = send(&f.app, get("/console/server", Some(&admin)))
        .await
        .body;

    // Environments: each with its size and whether it is in use, and the total.
    assert!(
        page.contains("2 environment(s), 5.0 KiB in total"),
        "{page}"
    );
    assert!(
        page.contains("1.0 KiB in environments no tool version uses"),
        "{page}"
    );
    let row = |id: &str| {
        let start = page
            .find(&format!("<code>{id}</code>"))
            .unwrap_or_else(|| panic!("{id}: {page}"));
        page[start..].split("</tr>").next().unwrap().to_owned()
    };
    assert!(row("env-none").contains("4.0 KiB") && row("env-none").contains("<td>yes</td>"));
    assert!(row("orphan").contains("garbage collection removes it"));

    // Upstreams: the answering one with its last call (a Connect error), the silent one
    // without credentials on the page.
    assert!(page.contains(&service), "{page}");
    assert!(page.contains("answering with an error"), "{page}");
    assert!(page.contains("/p.v1.S/Refused"), "{page}");
    assert!(
        !page.contains("pw-never-shown"),
        "credentials of a base URL on the page: {page}"
    );
    let upstream = |file: &str| {
        let start = page.find(file).unwrap_or_else(|| panic!("{file}: {page}"));
        page[start..].split("</tr>").next().unwrap().to_owned()
    };
    let answering = upstream("answering.json");
    assert!(
        answering.contains("<td>2</td><td>0</td>"),
        "two answered, none failed: {answering}"
    );
    let silent = upstream("silent.json");
    assert!(
        silent.contains("not answering") && silent.contains("<td>0</td><td>1</td>"),
        "{silent}"
    );

    // The warm pool as a table of facts, not a JSON dump.
    assert!(page.contains("Ready / starting / cold"), "{page}");
    assert!(!page.contains("max_templates"), "{page}");
}

#[tokio::test]
async fn oauth_sign_in_starts_only_from_the_form_and_a_callback_needs_its_browser() {
    let f = fixture().await;
    // An issuer nobody answers at: the start cannot reach it; the callback never asks it.
    let settings = |console: Option<ConsoleClient>| OAuthSettings {
        issuer: "http://127.0.0.1:1".into(),
        audiences: vec![format!("{ORIGIN}/mcp")],
        scopes: Default::default(),
        principal_claim: "sub".into(),
        leeway: Duration::from_secs(30),
        challenge_scopes: vec![omniforge_server::Scope::Call],
        jwks_min_refresh: Duration::from_secs(10),
        introspection: None,
        console,
    };
    let client = ConsoleClient {
        client_id: "console".into(),
        ..ConsoleClient::default()
    };
    let app = f._server.app(
        http_settings(Some(Arc::new(OAuth::new(settings(Some(client))).unwrap()))),
        CancellationToken::new(),
    );
    let form = send(&app, get("/console/sign-in", None)).await;
    assert!(
        form.body.contains(r#"action="/console/oauth/start""#)
            && form.body.contains("Sign in with http://127.0.0.1:1"),
        "{}",
        form.body
    );
    let (anonymous, _) = set_cookie(&form.headers);
    let token = csrf(&form.body);
    // Like every change: without the form's token, or from another origin, refused.
    for (form_fields, headers) in [
        (vec![], vec![]),
        (
            vec![("csrf", token.as_str())],
            vec![("origin", "https://evil.example")],
        ),
    ] {
        let refused = send(
            &app,
            post(
                "/console/oauth/start",
                Some(&anonymous),
                &form_fields,
                &headers,
            ),
        )
        .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    }
    let unreachable = send(
        &app,
        post(
            "/console/oauth/start",
            Some(&anonymous),
            &[("csrf", &token)],
            &[],
        ),
    )
    .await;
    assert_eq!(unreachable.status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        unreachable.body.contains("cannot be reached"),
        "{}",
        unreachable.body
    );
    assert!(!unreachable.headers.contains_key("location"));
    // A callback this server did not start, with or without a binding cookie: no session,
    // and the provider's error text is never echoed.
    for path in [
        "/console/oauth/callback?code=c&state=made-up",
        "/console/oauth/callback?error=%3Cscript%3E&state=made-up",
        "/console/oauth/callback",
    ] {
        let mut request = get(path, Some(&anonymous));
        request
            .headers_mut()
            .append("cookie", "omniforge_console_login=guessed".parse().unwrap());
        let answer = send(&app, request).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{path}");
        assert!(!answer.body.contains("<script>"), "{}", answer.body);
        assert!(
            answer
                .headers
                .get_all("set-cookie")
                .iter()
                .all(|c| !c.to_str().unwrap().starts_with("omniforge_console=")),
            "{path}: a session cookie"
        );
    }
    // Without a console client, neither route exists and the form has no button.
    let plain = f._server.app(
        http_settings(Some(Arc::new(OAuth::new(settings(None)).unwrap()))),
        CancellationToken::new(),
    );
    let form = send(&plain, get("/console/sign-in", None)).await;
    assert!(!form.body.contains("/console/oauth/start"), "{}", form.body);
    let callback = send(&plain, get("/console/oauth/callback?state=x&code=y", None)).await;
    assert_eq!(callback.status, StatusCode::NOT_FOUND);
}
