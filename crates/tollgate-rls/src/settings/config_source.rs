//! Where the settings say the configuration files are: the
//! [`ConfigSource`] of `--config DIR`, else of the `RUNTIME_*` directories.

use super::arguments::RlsArguments;
use crate::config::files::ConfigSource;
use crate::config::loader::LoaderOptions;

impl ConfigSource {
    /// The source the settings name: `--config DIR`, else the `RUNTIME_*`
    /// directories; `MERGE_DOMAIN_CONFIG` and the extensions flag as loader
    /// options.
    pub fn from_arguments(arguments: &RlsArguments) -> ConfigSource {
        let options = LoaderOptions {
            merge_domains: arguments.merge_domain_config,
            extensions: arguments.config_extensions,
        };
        match &arguments.config {
            Some(directory) => ConfigSource::directory(directory, options),
            None => ConfigSource::runtime(
                &arguments.runtime_root,
                &arguments.runtime_subdirectory,
                &arguments.runtime_appdirectory,
                arguments.runtime_ignoredotfiles,
                arguments.runtime_watch_root,
                options,
            ),
        }
    }
}
