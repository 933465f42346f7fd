//! A target's check of the certificate an execute call carries (`body["certificate"]`), before
//! it acts: Countersign's ES256 signature (a detached JWS over the certificate's RFC 8785 form,
//! by a key of the JWKS the target pinned), this approval, and the very payload it was sent.
//! The votes' passkey signatures and the rules are `countersign verify`'s (docs/VERIFY.md).
//! Crates: p256 (ecdsa), serde_json, serde_json_canonicalizer, base64.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use p256::ecdsa::signature::Verifier as _;
use p256::ecdsa::{Signature, VerifyingKey};
use serde_json::Value;

/// `Ok(())` when `certificate` is Countersign's, for `approval_id`, over `payload`.
pub fn verify_certificate(
    certificate: &Value,
    jwks: &Value,
    approval_id: &str,
    payload: &Value,
) -> Result<(), String> {
    let jws = certificate["signature"].as_str().ok_or("no signature")?;
    let (header, signature) = jws.split_once("..").ok_or("not a detached JWS")?;
    let header: Value = serde_json::from_slice(&B64.decode(header).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let jwk = jwks["keys"]
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["kid"] == header["kid"]))
        .ok_or("no such key in the JWKS")?;
    let point = |c: &str| {
        B64.decode(jwk[c].as_str().unwrap_or_default())
            .unwrap_or_default()
    };
    let key = VerifyingKey::from_sec1_bytes(&[vec![4], point("x"), point("y")].concat())
        .map_err(|e| e.to_string())?;
    let mut unsigned = certificate.clone();
    unsigned
        .as_object_mut()
        .ok_or("not an object")?
        .remove("signature");
    let canonical = serde_json_canonicalizer::to_vec(&unsigned).map_err(|e| e.to_string())?;
    let signed = format!(
        "{}.{}",
        jws.split('.').next().unwrap_or_default(),
        B64.encode(canonical)
    );
    let signature = Signature::from_slice(&B64.decode(signature).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    key.verify(signed.as_bytes(), &signature)
        .map_err(|_| "Countersign's signature does not verify")?;
    if certificate["approval_id"] != approval_id || &certificate["action"]["payload"] != payload {
        return Err("the certificate is for another approval or payload".to_owned());
    }
    Ok(())
}
