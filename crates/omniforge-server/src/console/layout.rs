//! The page shell: head (stylesheet from 'self' only, no script), skip link, navigation by
//! what the viewer may see, the one-shot message, and the main region.

use maud::{DOCTYPE, Markup, html};

use crate::auth::Scope;
use crate::console::assets;
use crate::console::guard::Viewer;

/// The navigation's sections.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Catalog,
    Content,
    Approvals,
    Calls,
    Audit,
    Secrets,
    Server,
}

fn head(title: &str, refresh: Option<&str>) -> Markup {
    html! {
        head {
            meta charset="utf-8";
            @if let Some(to) = refresh { meta http-equiv="refresh" content=(format!("0;url={to}")); }
            meta name="viewport" content="width=device-width, initial-scale=1";
            meta name="referrer" content="same-origin";
            title { (title) " · OmniForge console" }
            link rel="stylesheet" href=(assets::css_url());
        }
    }
}

/// A full page for a signed-in viewer.
pub(crate) fn page(viewer: &Viewer, nav: Nav, title: &str, content: Markup) -> Markup {
    let items: [(Nav, &str, &str, Scope); 7] = [
        (Nav::Catalog, "/console/tools", "Catalog", Scope::Call),
        (
            Nav::Content,
            "/console/content",
            "Resources and prompts",
            Scope::Call,
        ),
        (
            Nav::Approvals,
            "/console/approvals",
            "Approvals",
            Scope::Admin,
        ),
        (Nav::Calls, "/console/calls", "Calls", Scope::Call),
        (Nav::Audit, "/console/audit", "Audit log", Scope::Admin),
        (Nav::Secrets, "/console/secrets", "Secrets", Scope::Admin),
        (Nav::Server, "/console/server", "Server", Scope::Admin),
    ];
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, None))
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/console/tools" { "OmniForge" }
                    nav aria-label="Console" {
                        ul {
                            @for (item, href, label, scope) in items {
                                @if viewer.can(scope) {
                                    li {
                                        a href=(href) aria-current=[(item == nav).then_some("page")] { (label) }
                                    }
                                }
                            }
                        }
                    }
                    div.who {
                        span { (viewer.id()) " · " (viewer.principal.scope.as_str()) }
                        form method="post" action="/console/sign-out" {
                            input type="hidden" name="csrf" value=(viewer.csrf);
                            button.link type="submit" { "Sign out" }
                        }
                    }
                }
                main #main tabindex="-1" {
                    @if let Some(flash) = &viewer.flash {
                        div.flash.ok[flash.ok].err[!flash.ok] role="status" { (flash.text) }
                    }
                    (content)
                }
                footer { "OmniForge " (env!("CARGO_PKG_VERSION")) " console" }
            }
        }
    }
}

/// A page without navigation: refusals, errors.
pub(crate) fn bare(title: &str, message: &str) -> Markup {
    shell(
        title,
        html! {
            h1 { (title) }
            p { (message) }
            p { a href="/console/tools" { "Back to the console" } }
        },
    )
}

/// The shell of a page without navigation (sign-in, refusals).
pub(crate) fn shell(title: &str, content: Markup) -> Markup {
    shell_then(title, None, content)
}

/// [`shell`] that moves on to `refresh` (a console path) by itself: a navigation the page
/// starts, so the browser sends the SameSite=Strict session cookie with it even when the
/// page itself was reached from another site (the issuer's redirect back).
pub(crate) fn shell_then(title: &str, refresh: Option<&str>, content: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            (head(title, refresh))
            body {
                header.top { span.brand { "OmniForge" } }
                main #main.narrow tabindex="-1" { (content) }
            }
        }
    }
}
