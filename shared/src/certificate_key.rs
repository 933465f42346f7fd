//! Countersign's certificate key in AWS KMS (`ECC_NIST_P256`, `SIGN_VERIFY`): the dispatch
//! function signs each certificate with it (`kms:Sign`, its role alone), and the read function
//! publishes its public key (`kms:GetPublicKey`) at `/.well-known/countersign/jwks.json`. The
//! private key never leaves KMS.
//!
//! AWS's rules: Sign takes at most 4096 bytes of `RAW` message, so the certificate's JWS
//! signing input (as long as its payload) is sent as its SHA-256 (`MessageType: DIGEST`, 32
//! bytes, which `ECDSA_SHA_256` signs as it would have hashed the message); the signature comes
//! back DER-encoded, and JWS's ES256 wants `r ‖ s` (RFC 7518 §3.4).

use std::sync::Mutex;

use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::{MessageType, SigningAlgorithmSpec};
use p256::ecdsa::{Signature, VerifyingKey};
use p256::pkcs8::DecodePublicKey as _;
use sha2::{Digest, Sha256};

use crate::domain::passkey::Jwk;

#[derive(Debug, thiserror::Error)]
pub enum CertificateKeyError {
    #[error("KMS {0}: {1}")]
    Kms(&'static str, String),
    #[error("the certificate key is not a P-256 signing key: {0}")]
    NotP256(String),
}

#[derive(Debug)]
pub struct CertificateKey {
    kms: aws_sdk_kms::Client,
    arn: String,
    /// The public key, once read (it never changes for a key).
    public: Mutex<Option<Jwk>>,
}

impl CertificateKey {
    pub fn new(sdk: &aws_config::SdkConfig, arn: &str) -> Self {
        Self {
            kms: aws_sdk_kms::Client::new(sdk),
            arn: arn.to_owned(),
            public: Mutex::new(None),
        }
    }

    /// The JWS `kid`: the key's id (the last part of its ARN).
    pub fn kid(&self) -> &str {
        self.arn.rsplit('/').next().unwrap_or(&self.arn)
    }

    /// ES256 over `input`: `r ‖ s`, 64 bytes.
    pub async fn sign(&self, input: &[u8]) -> Result<[u8; 64], CertificateKeyError> {
        let digest = Sha256::digest(input);
        let signed = self
            .kms
            .sign()
            .key_id(&self.arn)
            .message(Blob::new(digest.to_vec()))
            .message_type(MessageType::Digest)
            .signing_algorithm(SigningAlgorithmSpec::EcdsaSha256)
            .send()
            .await
            .map_err(|e| {
                CertificateKeyError::Kms(
                    "Sign",
                    aws_sdk_kms::error::DisplayErrorContext(&e).to_string(),
                )
            })?;
        let der = signed
            .signature()
            .ok_or_else(|| CertificateKeyError::Kms("Sign", "no signature".to_owned()))?;
        let signature = Signature::from_der(der.as_ref())
            .map_err(|e| CertificateKeyError::NotP256(e.to_string()))?;
        Ok(signature.to_bytes().into())
    }

    /// The public key as a JWK (`kid`, `alg` ES256, `use` sig): one GetPublicKey per process.
    pub async fn jwk(&self) -> Result<Jwk, CertificateKeyError> {
        if let Some(jwk) = self.public.lock().ok().and_then(|p| p.clone()) {
            return Ok(jwk);
        }
        let got = self
            .kms
            .get_public_key()
            .key_id(&self.arn)
            .send()
            .await
            .map_err(|e| {
                CertificateKeyError::Kms(
                    "GetPublicKey",
                    aws_sdk_kms::error::DisplayErrorContext(&e).to_string(),
                )
            })?;
        let der = got
            .public_key()
            .ok_or_else(|| CertificateKeyError::Kms("GetPublicKey", "no key".to_owned()))?;
        let key = VerifyingKey::from_public_key_der(der.as_ref())
            .map_err(|e| CertificateKeyError::NotP256(e.to_string()))?;
        let mut jwk = Jwk::of(&key);
        jwk.kid = Some(self.kid().to_owned());
        jwk.alg = Some("ES256".to_owned());
        jwk.use_ = Some("sig".to_owned());
        if let Ok(mut public) = self.public.lock() {
            *public = Some(jwk.clone());
        }
        Ok(jwk)
    }
}
