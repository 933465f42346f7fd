//! A P-256 public key as a JSON Web Key (RFC 7517/7518 §6.2): what a verifier pins, what the
//! certificate names each vote's key by, and what the JWKS publishes of Countersign's own.

use p256::ecdsa::VerifyingKey;
use serde::{Deserialize, Serialize};

use super::{b64, unb64};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Jwk {
    pub kty: String,
    pub crv: String,
    pub x: String,
    pub y: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    #[serde(default, rename = "use", skip_serializing_if = "Option::is_none")]
    pub use_: Option<String>,
}

impl Jwk {
    /// The JWK of a P-256 point given by its affine coordinates (32 bytes each); `None` when
    /// they are not a point of the curve.
    pub fn p256(x: &[u8], y: &[u8]) -> Option<Self> {
        let mut sec1 = Vec::with_capacity(65);
        sec1.push(0x04);
        sec1.extend_from_slice(x);
        sec1.extend_from_slice(y);
        VerifyingKey::from_sec1_bytes(&sec1).ok()?;
        Some(Self {
            kty: "EC".to_owned(),
            crv: "P-256".to_owned(),
            x: b64(x),
            y: b64(y),
            kid: None,
            alg: None,
            use_: None,
        })
    }

    /// The JWK of a verifying key.
    pub fn of(key: &VerifyingKey) -> Self {
        let point = key.to_sec1_point(false);
        let bytes = point.as_bytes();
        // Uncompressed SEC1: 0x04 ‖ x ‖ y.
        Self::p256(&bytes[1..33], &bytes[33..65]).unwrap_or_else(|| Self {
            kty: "EC".to_owned(),
            crv: "P-256".to_owned(),
            x: String::new(),
            y: String::new(),
            kid: None,
            alg: None,
            use_: None,
        })
    }

    /// The key, when this is a P-256 point.
    pub fn verifying_key(&self) -> Option<VerifyingKey> {
        if self.kty != "EC" || self.crv != "P-256" {
            return None;
        }
        let (x, y) = (unb64(&self.x)?, unb64(&self.y)?);
        if x.len() != 32 || y.len() != 32 {
            return None;
        }
        let mut sec1 = vec![0x04];
        sec1.extend(x);
        sec1.extend(y);
        VerifyingKey::from_sec1_bytes(&sec1).ok()
    }

    /// The same key: curve and coordinates (not `kid`, `alg`, `use`).
    pub fn same_key(&self, other: &Jwk) -> bool {
        self.kty == other.kty && self.crv == other.crv && self.x == other.x && self.y == other.y
    }
}
