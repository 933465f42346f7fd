//! `METRICS_NAMESPACE` and `METRICS_TENANT_DIMENSION`: where the metrics go and whether each
//! carries its tenant.

use super::ConfigError;
use crate::observe::MetricsConfig;

/// `METRICS_NAMESPACE` (CloudWatch's rule, default the crate's own) and
/// `METRICS_TENANT_DIMENSION` (true or false, default false).
pub(super) fn metrics_config(
    get: &impl Fn(&str) -> Option<String>,
) -> Result<MetricsConfig, ConfigError> {
    Ok(MetricsConfig {
        namespace: get("METRICS_NAMESPACE")
            .map(|raw| {
                metrics_namespace(&raw).map_err(|e| ConfigError::new("METRICS_NAMESPACE", e))
            })
            .transpose()?
            .unwrap_or_else(|| MetricsConfig::default().namespace),
        tenant_dimension: match get("METRICS_TENANT_DIMENSION").as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(_) => {
                return Err(ConfigError::new(
                    "METRICS_TENANT_DIMENSION",
                    "must be true or false",
                ));
            }
        },
    })
}

/// CloudWatch's rule for a namespace: 1 to 255 of letters, digits and `.-_/#: `, not `AWS/…`.
fn metrics_namespace(raw: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || ".-_/#: ".contains(c);
    if raw.len() > 255 || !raw.chars().all(allowed) {
        Err("1 to 255 letters, digits and . - _ / # : or space".to_owned())
    } else if raw.starts_with("AWS/") {
        Err("the AWS/ namespaces are AWS's own".to_owned())
    } else {
        Ok(raw.to_owned())
    }
}
