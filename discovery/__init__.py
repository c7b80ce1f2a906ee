"""Discovery: a real fabric's cabling plan read from its switches' LLDP tables (SPEC §10.2).

Layers, each importing only the ones above it in this list:

* :mod:`discovery.tables`: the neutral record every reader produces, one
  :class:`~discovery.tables.SwitchTable` per switch (its LLDP neighbours per local port, its
  ifIndex → name map, its port speeds), and how a port id is read (a name, a local number, a MAC);
* :mod:`discovery.lldp_snmp` and :mod:`discovery.lldp_gnmi`: one switch read over SNMP
  (LLDP-MIB, IF-MIB) or gNMI (a Subscribe ONCE of the NOS profile's state paths), with the
  collector's own clients, walkers and decoders; protocol objects never leave them;
* :mod:`discovery.graph`: the tables turned into cables (both ends of a switch-to-switch cable
  seen once, remote port ids resolved, disagreements found), pure logic;
* :mod:`discovery.seeds` and :mod:`discovery.run`: which switches to poll (the config's
  inventory, the exact names of ``targets``, ``--switches``) and the crawl to the neighbours a
  target reaches, under a concurrency limit and a per-switch timeout;
* :mod:`discovery.build`: roles, rails and groups decided (:mod:`fabric.plan`), the version 2
  inventory built, the design judged (:mod:`fabric.design`), and the report;
* :mod:`discovery.netbox`: NetBox's devices, interfaces and cables read over its REST API for
  ``inventory import netbox`` (converted by :mod:`fabric.netbox_import`).

Errors::

    FabricmonError
    └── DiscoveryError                   discovery cannot start or cannot finish
        ├── NothingToPoll (ValueError)   no seed switch: nothing names a switch to start from
        ├── SwitchFailed                 one switch did not answer or refused us (it goes
        │                                into the report, never ends the run)
        └── NetboxError                  NetBox refused us, is not at the URL, or gave no list
"""
