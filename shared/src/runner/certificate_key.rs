//! The local AWS's certificate key: the template creates one (`CertificateKey`, KMS
//! `ECC_NIST_P256`, `SIGN_VERIFY`); the local stack creates its own at start, as the deployer
//! (its KMS is moto's, in memory: a new key each start).

/// A new certificate key on the local KMS: its ARN (what `CERTIFICATE_KEY_ARN` names).
pub async fn create_certificate_key(sdk: &aws_config::SdkConfig) -> Result<String, String> {
    let kms = aws_sdk_kms::Client::new(sdk);
    let created = kms
        .create_key()
        .description("Countersign's certificate key (local)")
        .key_spec(aws_sdk_kms::types::KeySpec::EccNistP256)
        .key_usage(aws_sdk_kms::types::KeyUsageType::SignVerify)
        .send()
        .await
        .map_err(|e| {
            format!(
                "creating the certificate key on the local KMS: {}",
                aws_sdk_kms::error::DisplayErrorContext(&e)
            )
        })?;
    created
        .key_metadata()
        .and_then(|k| k.arn())
        .map(str::to_owned)
        .ok_or_else(|| "the local KMS answered no key ARN".to_owned())
}
