//! The local AWS's stand-in for the account's verified SES identities: each sender of `EMAIL`
//! is verified at start (SES v2 `CreateEmailIdentity`, which moto verifies at once), and its
//! configuration set created, as the deployer does on AWS before a deploy (docs/EMAIL.md).

use std::collections::BTreeMap;

use aws_sdk_sesv2::error::ProvideErrorMetadata;

use crate::domain::TenantId;
use crate::email::EmailSender;

/// Verifies every sender of `senders` on the local SES, as the deployer (`sdk`).
pub async fn verify_senders(
    sdk: &aws_config::SdkConfig,
    senders: &BTreeMap<TenantId, EmailSender>,
) -> Result<(), String> {
    let ses = aws_sdk_sesv2::Client::new(sdk);
    for sender in senders.values() {
        if let Some(set) = &sender.configuration_set {
            match ses
                .create_configuration_set()
                .configuration_set_name(set)
                .send()
                .await
            {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.code(),
                        Some("AlreadyExistsException" | "ConfigurationSetAlreadyExistsException")
                    ) => {}
                Err(e) => {
                    return Err(format!(
                        "creating the configuration set {set} on the local SES: {}",
                        aws_sdk_sesv2::error::DisplayErrorContext(&e)
                    ));
                }
            }
        }
        match ses
            .create_email_identity()
            .email_identity(&sender.from)
            .send()
            .await
        {
            Ok(_) => {}
            Err(e) if e.code() == Some("AlreadyExistsException") => {}
            Err(e) => {
                return Err(format!(
                    "verifying the sender {} on the local SES: {}",
                    sender.from,
                    aws_sdk_sesv2::error::DisplayErrorContext(&e)
                ));
            }
        }
    }
    Ok(())
}
