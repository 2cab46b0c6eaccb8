//! [`Content`]: what is enabled now (an in-memory snapshot of the store's resources,
//! templates and prompts), reloaded when the store says content changed; a reload compares
//! the old and new snapshots and tells peers what changed (`resources/list_changed`,
//! `prompts/list_changed`, and `resources/updated` to the URI's subscribers).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use omniforge_store::{ResourceInfo, Store, StoreError, StoredPrompt, StoredTemplate};
use rmcp::model::{Prompt, PromptArgument, ResourceTemplate};
use uri_template_ex::UriTemplate;

use crate::content::subscriptions::Subscriptions;
use crate::content::uri_template::{match_uri, parse_uri_template};
use crate::peers::Peers;
use crate::runs::input_required::StateCodec;
use crate::script_host::host::ScriptHost;

/// What is enabled now.
#[derive(Default)]
pub(crate) struct Snapshot {
    pub(crate) resources: Vec<ResourceInfo>,
    pub(crate) templates: Vec<(StoredTemplate, Arc<UriTemplate>)>,
    pub(crate) prompts: Vec<StoredPrompt>,
}

impl Snapshot {
    /// The `resources/list` entries.
    fn resource_entries(&self) -> Vec<rmcp::model::Resource> {
        self.resources.iter().map(list_entry).collect()
    }

    /// The `resources/templates/list` entries.
    fn template_entries(&self) -> Vec<ResourceTemplate> {
        self.templates
            .iter()
            .map(|(t, _)| template_entry(t))
            .collect()
    }

    /// The `prompts/list` entries.
    fn prompt_entries(&self) -> Vec<Prompt> {
        self.prompts.iter().map(prompt_entry).collect()
    }
}

/// The stored resources, templates and prompts of one server.
pub(crate) struct Content {
    pub(crate) store: Arc<dyn Store>,
    /// Runs template, prompt and completion scripts.
    pub(crate) host: Arc<ScriptHost>,
    /// Seals and opens the `requestState` of a script template's or prompt's input-required
    /// results.
    pub(crate) states: Arc<StateCodec>,
    peers: Arc<Peers>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// Set after the first load (which notifies nobody).
    loaded: AtomicBool,
    /// One reload at a time (a built-in's own reload and the change feed may meet).
    reloading: tokio::sync::Mutex<()>,
    /// Who is told when a resource changes.
    pub(crate) subscriptions: Subscriptions,
}

impl Content {
    /// Loads what is stored.
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn load(
        store: Arc<dyn Store>,
        host: Arc<ScriptHost>,
        states: Arc<StateCodec>,
        peers: Arc<Peers>,
    ) -> Result<Arc<Content>, StoreError> {
        let content = Arc::new(Content {
            store,
            host,
            states,
            peers,
            snapshot: RwLock::default(),
            loaded: AtomicBool::new(false),
            reloading: tokio::sync::Mutex::new(()),
            subscriptions: Subscriptions::default(),
        });
        content.reload().await?;
        Ok(content)
    }

    /// The current snapshot.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads the store, and tells peers what changed: list changes to everyone, content
    /// changes to the sessions subscribed to that URI.
    ///
    /// # Errors
    /// The store cannot be read.
    pub(crate) async fn reload(&self) -> Result<(), StoreError> {
        let _one = self.reloading.lock().await;
        let resources: Vec<ResourceInfo> = self
            .store
            .list_resources()
            .await?
            .into_iter()
            .filter(|r| r.state.enabled)
            .collect();
        let mut templates = Vec::new();
        for t in self.store.list_templates().await? {
            if !t.state.enabled {
                continue;
            }
            match parse_uri_template("uriTemplate", &t.spec.uri_template) {
                Ok((parsed, _)) => templates.push((t, Arc::new(parsed))),
                Err(error) => tracing::warn!(%error, "skipping a stored resource template"),
            }
        }
        let prompts: Vec<StoredPrompt> = self
            .store
            .list_prompts()
            .await?
            .into_iter()
            .filter(|p| p.state.enabled)
            .collect();
        let new = Arc::new(Snapshot {
            resources,
            templates,
            prompts,
        });
        let first = !self.loaded.swap(true, Ordering::AcqRel);
        let old = std::mem::replace(
            &mut *self.snapshot.write().unwrap_or_else(|e| e.into_inner()),
            new.clone(),
        );
        if first {
            return Ok(());
        }
        let resource_list = |s: &Snapshot| (s.resource_entries(), s.template_entries());
        if resource_list(&old) != resource_list(&new) {
            self.peers.notify_resource_list_changed().await;
        }
        if old.prompt_entries() != new.prompt_entries() {
            self.peers.notify_prompt_list_changed().await;
        }
        let before: HashMap<&str, i64> = old
            .resources
            .iter()
            .map(|r| (r.uri.as_str(), r.state.updated_seq))
            .collect();
        for r in &new.resources {
            if before
                .get(r.uri.as_str())
                .is_some_and(|seq| *seq != r.state.updated_seq)
            {
                self.subscriptions.notify_updated(&r.uri).await;
            }
        }
        Ok(())
    }

    /// Whether `uri` is a stored resource or matches a template.
    pub(crate) fn is_known(&self, uri: &str) -> bool {
        let snapshot = self.snapshot();
        snapshot.resources.iter().any(|r| r.uri == uri)
            || snapshot
                .templates
                .iter()
                .any(|(_, t)| match_uri(t, uri).is_some())
    }

    /// The enabled stored resources, by URI.
    pub(crate) fn list_resources(&self) -> Vec<rmcp::model::Resource> {
        self.snapshot().resource_entries()
    }

    /// The enabled resource templates.
    pub(crate) fn list_templates(&self) -> Vec<ResourceTemplate> {
        self.snapshot().template_entries()
    }

    /// The enabled prompts, by name.
    pub(crate) fn list_prompts(&self) -> Vec<Prompt> {
        self.snapshot().prompt_entries()
    }
}

fn list_entry(r: &ResourceInfo) -> rmcp::model::Resource {
    let mut raw = rmcp::model::Resource::new(r.uri.clone(), r.name.clone());
    raw.title.clone_from(&r.title);
    raw.description.clone_from(&r.description);
    raw.mime_type.clone_from(&r.mime_type);
    raw.size = Some(r.size);
    raw
}

fn template_entry(t: &StoredTemplate) -> ResourceTemplate {
    let s = &t.spec;
    let mut template = ResourceTemplate::new(s.uri_template.clone(), s.name.clone());
    template.title.clone_from(&s.title);
    template.description.clone_from(&s.description);
    template.mime_type.clone_from(&s.mime_type);
    template
}

fn prompt_entry(p: &StoredPrompt) -> Prompt {
    let s = &p.spec;
    let arguments: Vec<PromptArgument> = s
        .arguments
        .iter()
        .map(|a| {
            let mut arg = PromptArgument::new(a.name.clone()).with_required(a.required);
            arg.title.clone_from(&a.title);
            arg.description.clone_from(&a.description);
            arg
        })
        .collect();
    let mut prompt = Prompt::new(
        s.name.clone(),
        s.description.clone(),
        (!arguments.is_empty()).then_some(arguments),
    );
    prompt.title.clone_from(&s.title);
    prompt
}
