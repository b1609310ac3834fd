//! A network's photos as retained topics and Home Assistant `image` entities (docs/mqtt.md,
//! "Photos"; docs/homeassistant.md).

use super::{Renderer, entity_name};
use crate::mqtt::discovery::{self, Component, Name, image};
use crate::mqtt::mirror::NetMirror;
use crate::mqtt::mirror::photos::PhotoRef;
use crate::mqtt::store::Topics;

impl Renderer {
    /// The photo topics of `mirror`'s network, with their stand-ins.
    pub(in crate::mqtt) fn photo_topics(&self, mirror: &NetMirror, out: &mut Topics) {
        for (photo, slug) in mirror.photos.iter() {
            out.push((self.layout.photo(&mirror.slug, slug), PhotoRef::text(&mirror.key, photo)));
        }
    }

    /// The image entities of `mirror`'s network device (object id `oid`).
    pub(in crate::mqtt) fn photo_components(&self, mirror: &NetMirror, oid: &str, out: &mut Vec<Component>) {
        let net = mirror.slug.as_str();
        for (photo, slug) in mirror.photos.iter() {
            let key = format!("photo_{}", discovery::key(&photo.image));
            let name: Name = entity_name(&photo.name, &mirror.view.status.name, "Photo", &photo.image);
            out.push(image::photo(
                key.clone(),
                format!("{oid}_{key}"),
                name,
                &discovery::entity_id("image", &[net, "photo", slug]),
                self.layout.photo(net, slug),
            ));
        }
    }
}
