//! The store traits for a backend type, once: `store_traits!(Type)` implements every
//! [`store`](crate::store) trait and [`Backend`](crate::Backend) for a type with a `core:
//! Core` field, by calling the engine's functions. The three methods that differ per backend
//! call the type's own inherent methods: `wait_for_change_here(seq, max_wait)`,
//! `backup_here(dest)` and `close_here()`.

/// Implements every store trait for `$t` (see the module docs).
macro_rules! store_traits {
    ($t:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ToolStore for $t {
            async fn create_tool(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                spec: $crate::model::NewVersion,
                status: $crate::model::NewStatus,
            ) -> Result<$crate::model::ToolVersion, $crate::error::StoreError> {
                $crate::engine::tools::create_tool(&self.core, actor, name, spec, status).await
            }

            async fn add_version(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                spec: $crate::model::NewVersion,
                status: $crate::model::NewStatus,
            ) -> Result<$crate::model::ToolVersion, $crate::error::StoreError> {
                $crate::engine::tools::add_version(&self.core, actor, name, spec, status).await
            }

            async fn get(
                &self,
                name: &str,
            ) -> Result<Option<$crate::model::StoredTool>, $crate::error::StoreError> {
                $crate::engine::tools::get(&self.core, name).await
            }

            async fn tool(
                &self,
                name: &str,
            ) -> Result<Option<$crate::model::Tool>, $crate::error::StoreError> {
                $crate::engine::tools::tool(&self.core, name).await
            }

            async fn tools(&self) -> Result<Vec<$crate::model::Tool>, $crate::error::StoreError> {
                $crate::engine::tools::tools(&self.core).await
            }

            async fn versions(
                &self,
                name: &str,
            ) -> Result<Vec<$crate::model::ToolVersion>, $crate::error::StoreError> {
                $crate::engine::tools::versions(&self.core, name).await
            }

            async fn version(
                &self,
                name: &str,
                number: u32,
            ) -> Result<$crate::model::ToolVersion, $crate::error::StoreError> {
                $crate::engine::tools::version(&self.core, name, number).await
            }

            async fn versions_with_status(
                &self,
                status: $crate::model::VersionStatus,
                author: Option<&str>,
            ) -> Result<Vec<$crate::model::ToolVersion>, $crate::error::StoreError> {
                $crate::engine::tools::versions_with_status(&self.core, status, author).await
            }

            async fn list_enabled(
                &self,
            ) -> Result<Vec<$crate::model::StoredTool>, $crate::error::StoreError> {
                $crate::engine::tools::list_enabled(&self.core).await
            }

            async fn for_each_enabled(
                &self,
                each: &mut (dyn FnMut($crate::model::StoredTool) + Send),
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::tools::for_each_enabled(&self.core, each).await
            }

            async fn set_enabled(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                enabled: bool,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::tools::set_enabled(&self.core, actor, name, enabled).await
            }

            async fn rollback(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                number: u32,
            ) -> Result<$crate::model::ToolVersion, $crate::error::StoreError> {
                $crate::engine::review::rollback(&self.core, actor, name, number).await
            }

            async fn approve(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                number: u32,
                grants: &[String],
            ) -> Result<$crate::model::ToolVersion, $crate::error::StoreError> {
                $crate::engine::review::approve(&self.core, actor, name, number, grants).await
            }

            async fn reject(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                number: u32,
                reason: &str,
            ) -> Result<$crate::model::ToolVersion, $crate::error::StoreError> {
                $crate::engine::review::reject(&self.core, actor, name, number, reason).await
            }

            async fn purge(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::tools::purge(&self.core, actor, name).await
            }

            async fn record_example_results(
                &self,
                name: &str,
                number: u32,
                results: Vec<$crate::model::ExampleResult>,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::examples::record(&self.core, name, number, results).await
            }

            async fn example_results(
                &self,
                name: &str,
                number: u32,
            ) -> Result<Vec<$crate::model::ExampleResult>, $crate::error::StoreError> {
                $crate::engine::examples::read(&self.core, name, number).await
            }

            async fn env_ids_in_use(
                &self,
            ) -> Result<std::collections::HashSet<String>, $crate::error::StoreError> {
                $crate::engine::tools::env_ids_in_use(&self.core).await
            }

            async fn data_version(&self) -> Result<i64, $crate::error::StoreError> {
                $crate::engine::changes::data_version(&self.core).await
            }

            async fn current_seq(&self) -> Result<u64, $crate::error::StoreError> {
                $crate::engine::changes::current_seq(&self.core).await
            }

            async fn changes_since(
                &self,
                seq: u64,
            ) -> Result<$crate::model::ChangeSet, $crate::error::StoreError> {
                $crate::engine::changes::since(&self.core, seq).await
            }

            async fn wait_for_change(&self, seq: u64, max_wait: std::time::Duration) {
                self.wait_for_change_here(seq, max_wait).await
            }

            async fn backup(
                &self,
                dest: &std::path::Path,
            ) -> Result<(), $crate::error::StoreError> {
                self.backup_here(dest).await
            }

            async fn close(&self) {
                self.close_here().await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::SecretStore for $t {
            async fn set_secret(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
                value: &str,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::secrets::set(&self.core, actor, name, value).await
            }

            async fn delete_secret(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::secrets::delete(&self.core, actor, name).await
            }

            async fn secret_names(&self) -> Result<Vec<String>, $crate::error::StoreError> {
                $crate::engine::secrets::names(&self.core).await
            }

            async fn secrets(
                &self,
            ) -> Result<Vec<$crate::model::SecretInfo>, $crate::error::StoreError> {
                $crate::engine::secrets::infos(&self.core).await
            }

            async fn secret_values(
                &self,
                names: &[String],
            ) -> Result<
                std::collections::HashMap<String, $crate::model::SecretValue>,
                $crate::error::StoreError,
            > {
                $crate::engine::secrets::values(&self.core, names).await
            }

            async fn granted_secrets(
                &self,
                tool: &str,
                version: u32,
            ) -> Result<
                std::collections::HashMap<String, $crate::model::SecretValue>,
                $crate::error::StoreError,
            > {
                $crate::engine::secrets::granted_values(&self.core, tool, version).await
            }

            async fn secret_requests(
                &self,
                tool: &str,
                version: u32,
            ) -> Result<Vec<$crate::model::SecretRequest>, $crate::error::StoreError> {
                $crate::engine::grants::requests(&self.core, tool, version).await
            }

            async fn grant_secret(
                &self,
                actor: &$crate::model::Actor,
                secret: &str,
                tool: &str,
                version: u32,
            ) -> Result<bool, $crate::error::StoreError> {
                $crate::engine::grants::grant(&self.core, actor, secret, tool, version).await
            }

            async fn revoke_secret(
                &self,
                actor: &$crate::model::Actor,
                secret: &str,
                tool: &str,
                version: u32,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::grants::revoke(&self.core, actor, secret, tool, version).await
            }

            async fn grants(
                &self,
                secret: Option<&str>,
                tool: Option<&str>,
            ) -> Result<Vec<$crate::model::Grant>, $crate::error::StoreError> {
                $crate::engine::grants::list(&self.core, secret, tool).await
            }

            async fn rotate_key(
                &self,
                actor: &$crate::model::Actor,
            ) -> Result<u64, $crate::error::StoreError> {
                $crate::engine::secrets::rotate_key(&self.core, actor).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::CallLog for $t {
            async fn record_call(
                &self,
                call: $crate::model::CallRecord,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::calls::record(&self.core, call).await
            }

            async fn record_calls(
                &self,
                calls: Vec<$crate::model::CallRecord>,
            ) -> Result<Vec<$crate::error::StoreError>, $crate::error::StoreError> {
                $crate::engine::calls::record_batch(&self.core, calls).await
            }

            async fn recent_calls(
                &self,
                name: &str,
                limit: u32,
            ) -> Result<Vec<$crate::model::CallRecord>, $crate::error::StoreError> {
                $crate::engine::calls::recent(&self.core, name, limit).await
            }

            async fn calls(
                &self,
                filter: &$crate::model::CallFilter,
            ) -> Result<Vec<$crate::model::LoggedCall>, $crate::error::StoreError> {
                $crate::engine::calls::calls(&self.core, filter).await
            }

            async fn call(
                &self,
                id: u64,
            ) -> Result<Option<$crate::model::LoggedCall>, $crate::error::StoreError> {
                $crate::engine::calls::call(&self.core, id).await
            }

            async fn call_hours(
                &self,
                tool: Option<($crate::model::CallSource, &str)>,
                since_ms: i64,
            ) -> Result<Vec<$crate::model::HourStats>, $crate::error::StoreError> {
                $crate::engine::hours::hours(&self.core, tool, since_ms).await
            }

            async fn call_activity(
                &self,
                since_ms: i64,
            ) -> Result<Vec<$crate::model::ToolActivity>, $crate::error::StoreError> {
                $crate::engine::hours::activity(&self.core, since_ms).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::AuditLog for $t {
            async fn audit(
                &self,
                filter: &$crate::model::AuditFilter,
            ) -> Result<Vec<$crate::model::AuditRecord>, $crate::error::StoreError> {
                $crate::engine::audit::audit(&self.core, filter).await
            }

            async fn prune_audit(
                &self,
                actor: &$crate::model::Actor,
                before_ms: i64,
            ) -> Result<u64, $crate::error::StoreError> {
                $crate::engine::audit::prune(&self.core, actor, before_ms).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::OutputStore for $t {
            async fn keep_output(
                &self,
                output: $crate::model::NewKeptOutput,
            ) -> Result<$crate::model::KeptOutput, $crate::error::StoreError> {
                $crate::engine::outputs::keep(&self.core, output).await
            }

            async fn kept_output(
                &self,
                run_id: &str,
                reader: $crate::model::OutputReader<'_>,
            ) -> Result<Option<$crate::model::KeptOutput>, $crate::error::StoreError> {
                $crate::engine::outputs::read(&self.core, run_id, reader).await
            }

            async fn extend_output_expiry(
                &self,
                run_id: &str,
                expires_at_ms: i64,
            ) -> Result<i64, $crate::error::StoreError> {
                $crate::engine::outputs::extend(&self.core, run_id, expires_at_ms).await
            }

            async fn purge_expired_outputs(&self) -> Result<u64, $crate::error::StoreError> {
                $crate::engine::outputs::purge_expired(&self.core).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::TaskStore for $t {
            async fn create_task(
                &self,
                task: $crate::model::NewTask,
            ) -> Result<$crate::model::StoredTask, $crate::error::StoreError> {
                $crate::engine::tasks::create(&self.core, task).await
            }

            async fn task(
                &self,
                task_id: &str,
                owner: &str,
            ) -> Result<Option<$crate::model::StoredTask>, $crate::error::StoreError> {
                $crate::engine::tasks::read(&self.core, task_id, owner).await
            }

            async fn task_for_replica(
                &self,
                task_id: &str,
            ) -> Result<Option<$crate::model::StoredTask>, $crate::error::StoreError> {
                $crate::engine::tasks::read_any(&self.core, task_id).await
            }

            async fn heartbeat_tasks(
                &self,
                replica: &str,
                lease: std::time::Duration,
            ) -> Result<u64, $crate::error::StoreError> {
                $crate::engine::tasks::heartbeat(&self.core, replica, lease).await
            }

            async fn require_task_input(
                &self,
                task_id: &str,
                replica: &str,
                requests: $crate::model::JsonObject,
                status_message: Option<&str>,
            ) -> Result<bool, $crate::error::StoreError> {
                $crate::engine::tasks::require_input(
                    &self.core,
                    task_id,
                    replica,
                    requests,
                    status_message,
                )
                .await
            }

            async fn update_task(
                &self,
                task_id: &str,
                owner: &str,
                responses: $crate::model::JsonObject,
            ) -> Result<Vec<String>, $crate::error::StoreError> {
                $crate::engine::tasks::update(&self.core, task_id, owner, responses).await
            }

            async fn take_task_responses(
                &self,
                task_id: &str,
                replica: &str,
            ) -> Result<$crate::model::JsonObject, $crate::error::StoreError> {
                $crate::engine::tasks::take_responses(&self.core, task_id, replica).await
            }

            async fn finish_task(
                &self,
                task_id: &str,
                replica: &str,
                end: $crate::model::TaskEnd,
                status_message: Option<&str>,
            ) -> Result<bool, $crate::error::StoreError> {
                $crate::engine::tasks::finish(&self.core, task_id, replica, end, status_message)
                    .await
            }

            async fn cancel_task(
                &self,
                task_id: &str,
                owner: &str,
            ) -> Result<$crate::model::StoredTask, $crate::error::StoreError> {
                $crate::engine::tasks::cancel(&self.core, task_id, owner).await
            }

            async fn fail_lapsed_tasks(&self) -> Result<Vec<String>, $crate::error::StoreError> {
                $crate::engine::tasks::fail_lapsed(&self.core).await
            }

            async fn fail_replica_tasks(
                &self,
                replica: &str,
            ) -> Result<Vec<String>, $crate::error::StoreError> {
                $crate::engine::tasks::fail_replica(&self.core, replica).await
            }

            async fn purge_expired_tasks(&self) -> Result<u64, $crate::error::StoreError> {
                $crate::engine::tasks::purge_expired(&self.core).await
            }

            async fn count_tasks(
                &self,
            ) -> Result<Vec<($crate::model::TaskStatus, u64)>, $crate::error::StoreError> {
                $crate::engine::tasks::count(&self.core).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::ContentStore for $t {
            async fn list_resources(
                &self,
            ) -> Result<Vec<$crate::model::ResourceInfo>, $crate::error::StoreError> {
                $crate::engine::content::list_resources(&self.core).await
            }

            async fn get_resource(
                &self,
                uri: &str,
            ) -> Result<Option<$crate::model::StoredResource>, $crate::error::StoreError> {
                $crate::engine::content::get_resource(&self.core, uri).await
            }

            async fn put_resource(
                &self,
                actor: &$crate::model::Actor,
                resource: $crate::model::NewResource,
                mode: $crate::model::WriteMode,
            ) -> Result<bool, $crate::error::StoreError> {
                $crate::engine::content::put_resource(&self.core, actor, resource, mode).await
            }

            async fn delete_resource(
                &self,
                actor: &$crate::model::Actor,
                uri: &str,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::content::delete_resource(&self.core, actor, uri).await
            }

            async fn list_templates(
                &self,
            ) -> Result<Vec<$crate::model::StoredTemplate>, $crate::error::StoreError> {
                $crate::engine::content::list_templates(&self.core).await
            }

            async fn put_template(
                &self,
                actor: &$crate::model::Actor,
                template: $crate::model::NewTemplate,
                mode: $crate::model::WriteMode,
            ) -> Result<bool, $crate::error::StoreError> {
                $crate::engine::content::put_template(&self.core, actor, template, mode).await
            }

            async fn delete_template(
                &self,
                actor: &$crate::model::Actor,
                uri_template: &str,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::content::delete_template(&self.core, actor, uri_template).await
            }

            async fn get_template(
                &self,
                uri_template: &str,
            ) -> Result<Option<$crate::model::StoredTemplate>, $crate::error::StoreError> {
                $crate::engine::content::get_template(&self.core, uri_template).await
            }

            async fn list_prompts(
                &self,
            ) -> Result<Vec<$crate::model::StoredPrompt>, $crate::error::StoreError> {
                $crate::engine::content::list_prompts(&self.core).await
            }

            async fn put_prompt(
                &self,
                actor: &$crate::model::Actor,
                prompt: $crate::model::NewPrompt,
                mode: $crate::model::WriteMode,
            ) -> Result<bool, $crate::error::StoreError> {
                $crate::engine::content::put_prompt(&self.core, actor, prompt, mode).await
            }

            async fn delete_prompt(
                &self,
                actor: &$crate::model::Actor,
                name: &str,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::content::delete_prompt(&self.core, actor, name).await
            }

            async fn get_prompt(
                &self,
                name: &str,
            ) -> Result<Option<$crate::model::StoredPrompt>, $crate::error::StoreError> {
                $crate::engine::content::get_prompt(&self.core, name).await
            }

            async fn import(
                &self,
                actor: &$crate::model::Actor,
                batch: $crate::model::ImportBatch,
            ) -> Result<$crate::model::ImportReport, $crate::error::StoreError> {
                $crate::engine::content::import(&self.core, actor, batch).await
            }
        }

        #[async_trait::async_trait]
        impl $crate::dump::Backend for $t {
            fn kind(&self) -> &'static str {
                self.core.db.kind()
            }

            async fn export(&self) -> Result<$crate::dump::StoreDump, $crate::error::StoreError> {
                $crate::engine::dump::export(&self.core, $crate::engine::dump::SecretsAs::Opened)
                    .await
            }

            async fn import_dump(
                &self,
                dump: &$crate::dump::StoreDump,
            ) -> Result<(), $crate::error::StoreError> {
                $crate::engine::dump::import(&self.core, dump).await
            }
        }
    };
}
pub(crate) use store_traits;
