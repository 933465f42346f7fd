//! A vote's passkey evidence in its decision's map (`passkey`): the statement, the assertion's
//! parts (base64url, as the certificate carries them) and the credential's public key.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

use crate::domain::passkey::Jwk;
use crate::domain::{CertificateSeal, PasskeyEvidence};
use crate::store::attr::{Item, get_n, get_s, n, s};
use crate::store::error::StoreError;

pub(super) fn evidence_to_attr(evidence: &PasskeyEvidence) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("statement".to_owned(), s(&evidence.statement)),
        ("credential_id".to_owned(), s(&evidence.credential_id)),
        (
            "authenticator_data".to_owned(),
            s(&evidence.authenticator_data),
        ),
        ("client_data_json".to_owned(), s(&evidence.client_data_json)),
        ("signature".to_owned(), s(&evidence.signature)),
        ("x".to_owned(), s(&evidence.public_key.x)),
        ("y".to_owned(), s(&evidence.public_key.y)),
        ("iss".to_owned(), s(&evidence.iss)),
        ("sub".to_owned(), s(&evidence.sub)),
        ("registered_at".to_owned(), n(evidence.registered_at)),
    ]))
}

/// The decision's evidence, if it has any (a vote cast before v7, or by another means: none).
pub(super) fn evidence_from(decision: &Item) -> Result<Option<Box<PasskeyEvidence>>, StoreError> {
    let Some(AttributeValue::M(map)) = decision.get("passkey") else {
        return Ok(None);
    };
    let text = |name: &'static str| get_s(map, name).map(str::to_owned);
    Ok(Some(Box::new(PasskeyEvidence {
        statement: text("statement")?,
        credential_id: text("credential_id")?,
        authenticator_data: text("authenticator_data")?,
        client_data_json: text("client_data_json")?,
        signature: text("signature")?,
        public_key: Jwk {
            kty: "EC".to_owned(),
            crv: "P-256".to_owned(),
            x: text("x")?,
            y: text("y")?,
            kid: None,
            alg: None,
            use_: None,
        },
        iss: text("iss")?,
        sub: text("sub")?,
        registered_at: get_n(map, "registered_at")?,
    })))
}

/// The approval's attribute holding its certificate's seal.
pub(crate) const CERTIFICATE: &str = "certificate";

pub(crate) fn seal_to_attr(seal: &CertificateSeal) -> AttributeValue {
    AttributeValue::M(HashMap::from([
        ("issued_at".to_owned(), n(seal.issued_at)),
        ("signature".to_owned(), s(&seal.signature)),
    ]))
}

pub(crate) fn seal_from_attr(value: &AttributeValue) -> Result<CertificateSeal, StoreError> {
    let AttributeValue::M(map) = value else {
        return Err(StoreError::corrupt("certificate"));
    };
    Ok(CertificateSeal {
        issued_at: get_n(map, "issued_at")?,
        signature: get_s(map, "signature")?.to_owned(),
    })
}

pub(super) fn seal_from(item: &Item) -> Result<Option<CertificateSeal>, StoreError> {
    item.get(CERTIFICATE).map(seal_from_attr).transpose()
}
