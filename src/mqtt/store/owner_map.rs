//! [`OwnerMap`]: a map keyed by [`Owner`], laid out by network and, within a network, as lists of
//! ids kept sorted.
//!
//! The store keeps what every owner wants in one of these. A big site has tens of thousands of
//! owners (units, groups, scenes, networks). One hash map of them all is a table that grows by
//! doubling, half empty after it grows, and while it grows both tables are alive: that moment
//! would set the bridge's peak memory. Here a unit costs its id and its value in its network's
//! list, and nothing grows past its network.
//!
//! A lookup hashes the network's id once (most of what hashing the whole owner would cost) and
//! then binary-searches a list of at most a few hundred ids.

use crate::mqtt::store::Owner;
use foldhash::HashMap;
use std::sync::Arc;

/// Values by [`Owner`]: the bridge's alone, every other in its network's entries.
#[derive(Debug)]
pub struct OwnerMap<V> {
    bridge: Option<V>,
    /// Never holds a network without a value: [`OwnerMap::remove`] drops it with its last one.
    networks: HashMap<Arc<str>, NetworkEntries<V>>,
}

impl<V> Default for OwnerMap<V> {
    fn default() -> Self {
        OwnerMap { bridge: None, networks: HashMap::default() }
    }
}

/// One network's values: its own, and its members' in one list per [`Kind`], sorted by id.
#[derive(Debug)]
struct NetworkEntries<V> {
    network: Option<V>,
    lists: [Vec<(u32, V)>; Kind::ALL.len()],
}

impl<V> Default for NetworkEntries<V> {
    fn default() -> Self {
        NetworkEntries { network: None, lists: Default::default() }
    }
}

/// Which list of its network an owner with an id is in.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Unit,
    Data,
    Group,
    Scene,
}

impl Kind {
    /// Every kind, in the order of [`OwnerMap::owners_of`].
    const ALL: [Kind; 4] = [Kind::Unit, Kind::Data, Kind::Group, Kind::Scene];

    /// The owner of `id` in this list of `network`.
    fn owner(self, network: Arc<str>, id: u32) -> Owner {
        match self {
            Kind::Unit => Owner::Unit(network, id),
            Kind::Data => Owner::Data(network, id),
            Kind::Group => Owner::Group(network, id),
            Kind::Scene => Owner::Scene(network, id),
        }
    }
}

/// Where an owner's value is kept: its network and, unless it is the network itself, its list
/// and id.
type Place<'o> = (&'o Arc<str>, Option<(Kind, u32)>);

/// Where `owner`'s value is kept; `None` for the bridge.
fn place(owner: &Owner) -> Option<Place<'_>> {
    match owner {
        Owner::Bridge => None,
        Owner::Network(n) => Some((n, None)),
        Owner::Unit(n, id) => Some((n, Some((Kind::Unit, *id)))),
        Owner::Data(n, id) => Some((n, Some((Kind::Data, *id)))),
        Owner::Group(n, id) => Some((n, Some((Kind::Group, *id)))),
        Owner::Scene(n, id) => Some((n, Some((Kind::Scene, *id)))),
    }
}

/// The position of `id` in a list sorted by id, or where it would go.
fn search<V>(list: &[(u32, V)], id: u32) -> Result<usize, usize> {
    list.binary_search_by_key(&id, |(k, _)| *k)
}

impl<V> NetworkEntries<V> {
    fn list(&self, kind: Kind) -> &Vec<(u32, V)> {
        &self.lists[kind as usize]
    }

    fn list_mut(&mut self, kind: Kind) -> &mut Vec<(u32, V)> {
        &mut self.lists[kind as usize]
    }

    fn is_empty(&self) -> bool {
        self.network.is_none() && self.lists.iter().all(Vec::is_empty)
    }

    /// Every value, the network's first, then its members' list by list, each by id.
    fn values(&self) -> impl Iterator<Item = &V> {
        let members = self.lists.iter().flatten().map(|(_, v)| v);
        self.network.iter().chain(members)
    }
}

impl<V> OwnerMap<V> {
    /// The value of `owner`.
    pub fn get(&self, owner: &Owner) -> Option<&V> {
        let Some((network, member)) = place(owner) else { return self.bridge.as_ref() };
        let entries = self.networks.get(&**network)?;
        match member {
            None => entries.network.as_ref(),
            Some((kind, id)) => {
                let list = entries.list(kind);
                search(list, id).ok().map(|i| &list[i].1)
            }
        }
    }

    /// The value of `owner`, to change in place.
    pub fn get_mut(&mut self, owner: &Owner) -> Option<&mut V> {
        let Some((network, member)) = place(owner) else { return self.bridge.as_mut() };
        let entries = self.networks.get_mut(&**network)?;
        match member {
            None => entries.network.as_mut(),
            Some((kind, id)) => {
                let list = entries.list_mut(kind);
                search(list, id).ok().map(|i| &mut list[i].1)
            }
        }
    }

    /// Sets the value of `owner`; returns the one it replaces.
    pub fn insert(&mut self, owner: &Owner, value: V) -> Option<V> {
        match place(owner) {
            None => self.bridge.replace(value),
            Some((network, member)) => {
                let entries = match self.networks.get_mut(&**network) {
                    Some(entries) => entries,
                    None => self.networks.entry(Arc::clone(network)).or_default(),
                };
                match member {
                    None => entries.network.replace(value),
                    Some((kind, id)) => {
                        let list = entries.list_mut(kind);
                        match search(list, id) {
                            Ok(i) => Some(std::mem::replace(&mut list[i].1, value)),
                            Err(i) => {
                                list.insert(i, (id, value));
                                None
                            }
                        }
                    }
                }
            }
        }
    }

    /// Removes the value of `owner` and returns it. A network whose last value goes gives its
    /// lists back.
    pub fn remove(&mut self, owner: &Owner) -> Option<V> {
        match place(owner) {
            None => self.bridge.take(),
            Some((network, member)) => {
                let entries = self.networks.get_mut(&**network)?;
                let old = match member {
                    None => entries.network.take(),
                    Some((kind, id)) => {
                        let list = entries.list_mut(kind);
                        search(list, id).ok().map(|i| list.remove(i).1)
                    }
                };
                if entries.is_empty() {
                    self.networks.remove(&**network);
                }
                old
            }
        }
    }

    /// Every value, in no particular order of networks.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.bridge.iter().chain(self.networks.values().flat_map(NetworkEntries::values))
    }

    /// The owners of `network`'s values: the network, then its units, their datapoints, its
    /// groups and its scenes, each by id.
    pub fn owners_of(&self, network: &str) -> Vec<Owner> {
        let Some((name, entries)) = self.networks.get_key_value(network) else { return Vec::new() };
        let members = Kind::ALL
            .into_iter()
            .flat_map(|kind| entries.list(kind).iter().map(move |(id, _)| kind.owner(Arc::clone(name), *id)));
        entries.network.as_ref().map(|_| Owner::Network(Arc::clone(name))).into_iter().chain(members).collect()
    }

    /// Whether no owner has a value (a network without one is never kept).
    pub fn is_empty(&self) -> bool {
        self.bridge.is_none() && self.networks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(name: &str) -> Arc<str> {
        Arc::from(name)
    }

    #[test]
    fn every_kind_of_owner_keeps_its_own_value() {
        let (a, b) = (net("a"), net("b"));
        let owners = [
            Owner::Bridge,
            Owner::Network(a.clone()),
            Owner::Unit(a.clone(), 7),
            Owner::Group(a.clone(), 7),
            Owner::Scene(a.clone(), 7),
            Owner::Unit(b.clone(), 7),
            Owner::Network(b.clone()),
        ];
        let mut map = OwnerMap::default();
        for (i, owner) in owners.iter().enumerate() {
            assert_eq!(map.insert(owner, i), None, "{owner:?} is new");
        }
        assert_eq!(map.values().count(), owners.len());
        for (i, owner) in owners.iter().enumerate() {
            assert_eq!(map.get(owner), Some(&i), "{owner:?}");
        }
        assert_eq!(map.get(&Owner::Unit(a.clone(), 8)), None);
        assert_eq!(map.get(&Owner::Unit(net("c"), 7)), None);
        *map.get_mut(&Owner::Group(a.clone(), 7)).unwrap() = 30;
        assert_eq!(map.insert(&Owner::Scene(a.clone(), 7), 40), Some(4));
        assert_eq!(map.get(&Owner::Group(a.clone(), 7)), Some(&30));
        assert_eq!(map.values().count(), owners.len(), "a replaced value is not a new owner");
        let mut values: Vec<usize> = map.values().copied().collect();
        values.sort_unstable();
        assert_eq!(values, vec![0, 1, 2, 5, 6, 30, 40]);
    }

    #[test]
    fn ids_stay_sorted_whatever_the_order_they_come_in() {
        let a = net("a");
        let mut map = OwnerMap::default();
        for id in [5, 1, 9, 3, 7, 2] {
            map.insert(&Owner::Unit(a.clone(), id), id * 10);
        }
        map.insert(&Owner::Scene(a.clone(), 4), 0);
        map.insert(&Owner::Network(a.clone()), 0);
        let owners = map.owners_of("a");
        let expected: Vec<Owner> = [Owner::Network(a.clone())]
            .into_iter()
            .chain([1, 2, 3, 5, 7, 9].map(|id| Owner::Unit(a.clone(), id)))
            .chain([Owner::Scene(a.clone(), 4)])
            .collect();
        assert_eq!(owners, expected);
        for id in [1, 2, 3, 5, 7, 9] {
            assert_eq!(map.get(&Owner::Unit(a.clone(), id)), Some(&(id * 10)));
        }
        assert!(map.owners_of("b").is_empty());
    }

    #[test]
    fn removing_the_last_value_of_a_network_forgets_the_network() {
        let (a, b) = (net("a"), net("b"));
        let mut map = OwnerMap::default();
        map.insert(&Owner::Unit(a.clone(), 1), 1);
        map.insert(&Owner::Group(a.clone(), 2), 2);
        map.insert(&Owner::Unit(b.clone(), 1), 3);
        assert_eq!(map.remove(&Owner::Unit(a.clone(), 9)), None, "nothing there");
        assert_eq!(map.remove(&Owner::Network(a.clone())), None, "nothing there");
        assert_eq!(map.values().count(), 3);
        assert_eq!(map.remove(&Owner::Unit(a.clone(), 1)), Some(1));
        assert_eq!(map.networks.len(), 2);
        assert_eq!(map.remove(&Owner::Group(a.clone(), 2)), Some(2));
        assert_eq!(map.networks.len(), 1, "network a has no value left");
        assert_eq!(map.remove(&Owner::Bridge), None);
        assert_eq!(map.values().count(), 1);
        assert!(!map.is_empty());
        assert_eq!(map.remove(&Owner::Unit(b.clone(), 1)), Some(3));
        assert!(map.is_empty() && map.networks.is_empty());
    }
}
