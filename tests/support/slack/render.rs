//! A message as Slack would roughly draw it, as an HTML page (`/messages/{ts}` on the fake):
//! for the eye and the screenshot, nothing the tests assert on. Apart from the Web API
//! (`web_api.rs`) because it is drawing, not Slack's behaviour.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use super::{FakeSlack, Message};

/// The message as Slack would roughly draw it: header, fields, sections, buttons, context.
pub(super) async fn page(State(slack): State<FakeSlack>, Path(ts): Path<String>) -> Response {
    let Some(message) = slack.messages().into_iter().find(|m| m.ts == ts) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    Html(render(&message)).into_response()
}

fn mrkdwn(text: &str) -> String {
    // `<!date^…|fallback>` shows its fallback; `&`, `<` and `>` come escaped, as HTML's.
    let mut text = text.to_owned();
    while let Some(start) = text.find("<!date^") {
        let (Some(bar), Some(end)) = (text[start..].find('|'), text[start..].find('>')) else {
            break;
        };
        text = format!(
            "{}{}{}",
            &text[..start],
            &text[start + bar + 1..start + end],
            &text[start + end + 1..]
        );
    }
    // Slack's emoji, as glyphs any font has.
    let text = text
        .replace(":white_check_mark:", "<span class=yes>✔</span>")
        .replace(":x:", "<span class=no>✘</span>");
    let mut html = String::new();
    let (mut bold, mut code) = (false, false);
    for c in text.chars() {
        match c {
            '*' if !code => {
                html.push_str(if bold { "</b>" } else { "<b>" });
                bold = !bold;
            }
            '`' => {
                html.push_str(if code { "</code>" } else { "<code>" });
                code = !code;
            }
            '\n' => html.push_str("<br>"),
            c => html.push(c),
        }
    }
    html
}

fn render(message: &Message) -> String {
    let mut body = String::new();
    for block in message.blocks.as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("header") => body.push_str(&format!(
                "<h2>{}</h2>",
                block["text"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .replace('<', "&lt;")
            )),
            Some("section") => {
                if let Some(fields) = block["fields"].as_array() {
                    body.push_str("<div class=fields>");
                    for f in fields {
                        body.push_str(&format!(
                            "<div>{}</div>",
                            mrkdwn(f["text"].as_str().unwrap_or_default())
                        ));
                    }
                    body.push_str("</div>");
                }
                if let Some(text) = block["text"]["text"].as_str() {
                    body.push_str(&format!("<p>{}</p>", mrkdwn(text)));
                }
            }
            Some("actions") => {
                body.push_str("<div class=actions>");
                for e in block["elements"].as_array().into_iter().flatten() {
                    body.push_str(&format!(
                        "<button class={}>{}</button>",
                        e["style"].as_str().unwrap_or("default"),
                        e["text"]["text"].as_str().unwrap_or_default()
                    ));
                }
                body.push_str("</div>");
            }
            Some("context") => {
                for e in block["elements"].as_array().into_iter().flatten() {
                    body.push_str(&format!(
                        "<p class=context>{}</p>",
                        mrkdwn(e["text"].as_str().unwrap_or_default())
                    ));
                }
            }
            _ => {}
        }
    }
    format!(
        r#"<!doctype html><meta charset=utf-8><title>Countersign in Slack</title>
<style>
body {{ font: 15px/1.46 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; background: #fff; margin: 0; padding: 20px; width: 620px; color: #1d1c1d }}
.msg {{ display: flex; gap: 10px }} .avatar {{ width: 36px; height: 36px; border-radius: 6px; background: #4a154b; color: #fff; font-weight: 700; display: grid; place-items: center }}
.name {{ font-weight: 900 }} .app {{ font-size: 10px; background: #ddd; border-radius: 2px; padding: 1px 3px; color: #555; margin-left: 4px }}
h2 {{ font-size: 18px; margin: 6px 0 }} .fields {{ display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin: 8px 0 }}
code {{ background: #f4f4f4; border: 1px solid #ddd; border-radius: 3px; padding: 0 3px; color: #e01e5a; font-size: 12px }}
p {{ margin: 8px 0 }} .yes {{ color: #2eb67d; font-weight: 700 }} .no {{ color: #e01e5a; font-weight: 700 }} .context {{ color: #616061; font-size: 12px }}
button {{ font: inherit; font-weight: 700; font-size: 14px; border-radius: 4px; padding: 4px 14px; margin-right: 8px; border: 1px solid #ddd; background: #fff }}
button.primary {{ background: #007a5a; color: #fff; border-color: #007a5a }} button.danger {{ color: #e01e5a; border-color: #e01e5a }}
</style>
<div class=msg><div class=avatar>CS</div><div><span class=name>Countersign</span><span class=app>APP</span>{body}</div></div>"#
    )
}
