//! `image` entities: one per photo of a network's gallery, its PNG file retained on its topic.

use super::{Component, Name, base_config};
use serde_json::json;

/// The image entity of a photo whose PNG bytes are retained on `image_topic`.
pub fn photo(key: String, unique_id: String, name: Name, entity_id: &str, image_topic: String) -> Component {
    let mut config = base_config(&name, entity_id);
    config.insert("image_topic".into(), json!(image_topic));
    config.insert("content_type".into(), json!("image/png"));
    Component { key, platform: "image", unique_id, availability: None, config }
}
