"""Cloud providers' special addresses: instance metadata, platform agents, DNS and time servers.

These are not in the IANA registries, yet from inside a cloud VM they hand out credentials or
talk to the host. Most sit inside an IANA block the judge already refuses (link local, shared
address space, unique local); the table still names them, so a denial says which service it
was, a test proves each one refused in every spelling, and an operator who allows a private
network (say 169.254.0.0/16 for a sidecar) is still refused these. One sits in public space and
is refused only because it is listed here: Azure's WireServer, 168.63.129.16.

Reviewed 2026-12-03 against each provider's documentation (the `source` of each row). Rows marked
"peer" have no provider page found; they are listed by several SSRF guards and sit in unique
local space, so listing them costs nothing. To add a row: the provider's page, the exact
address (a /32 or /128 unless the provider documents a block), a test spelling in
tests/egress/test_egress_cloud.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

__all__ = ["CLOUD_ADDRESSES", "CloudAddress", "cloud_service"]


@dataclass(frozen=True)
class CloudAddress:
    """One provider address (or documented block) and what answers there."""

    network: IPv4Network | IPv6Network
    provider: str
    service: str
    source: str


_AWS_IMDS = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html"
_AWS_DNS = "https://docs.aws.amazon.com/vpc/latest/userguide/AmazonDNS-concepts.html"
_AWS_NTP = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configure-ec2-ntp.html"
_AWS_ECS = "https://docs.aws.amazon.com/AmazonECS/latest/developerguide/task-metadata-endpoint-v2.html"
_AWS_EKS = "https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html"
_GCP = "https://cloud.google.com/compute/docs/metadata/querying-metadata"
_AZURE_IMDS = "https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service"
_AZURE_WIRE = "https://learn.microsoft.com/azure/virtual-network/what-is-ip-address-168-63-129-16"
_OCI = "https://docs.oracle.com/iaas/Content/Compute/Tasks/gettingmetadata.htm"
_ALIBABA = "https://www.alibabacloud.com/help/en/ecs/user-guide/view-instance-metadata"
_DO = "https://docs.digitalocean.com/reference/api/metadata/"
_LINODE = "https://techdocs.akamai.com/cloud-computing/docs/metadata-service-api"
_SCALEWAY = "https://www.scaleway.com/en/docs/instances/"
_TENCENT = "https://www.tencentcloud.com/document/product/213/4934"
_PEER = "peer (listed by several SSRF guards; no provider page found)"

_ROWS: tuple[tuple[str, str, str, str], ...] = (
    # Public space: refused only because of this table.
    ("168.63.129.16/32", "Azure", "WireServer: VM agent, DHCP, DNS and health probes", _AZURE_WIRE),
    # IPv4 link local (169.254/16) and shared space (100.64/10): refused by IANA too.
    (
        "169.254.169.254/32",
        "AWS, GCP, Azure, Oracle, DigitalOcean, Linode",
        "instance metadata",
        " ".join((_AWS_IMDS, _GCP, _AZURE_IMDS, _OCI, _DO, _LINODE)),
    ),
    ("169.254.169.253/32", "AWS", "VPC DNS resolver", _AWS_DNS),
    ("169.254.169.123/32", "AWS", "time sync (NTP)", _AWS_NTP),
    ("169.254.170.2/32", "AWS", "ECS task metadata and credentials", _AWS_ECS),
    ("169.254.170.23/32", "AWS", "EKS Pod Identity agent (credentials)", _AWS_EKS),
    ("169.254.42.42/32", "Scaleway", "instance metadata", _SCALEWAY),
    ("169.254.0.23/32", "Tencent Cloud", "instance metadata", _TENCENT),
    ("100.100.100.200/32", "Alibaba Cloud", "instance metadata", _ALIBABA),
    ("192.0.0.192/32", "Oracle Cloud Classic", "instance metadata", _OCI),
    # IPv6 unique local (fc00::/7): refused by IANA too.
    (
        "fd00:ec2::/32",
        "AWS",
        "IMDS, DNS, NTP and EKS Pod Identity over IPv6 (fd00:ec2::254 and siblings)",
        _AWS_IMDS,
    ),
    ("fd20:ce::254/128", "GCP", "instance metadata over IPv6", _GCP),
    ("fd00:c1::a9fe:a9fe/128", "Oracle", "instance metadata over IPv6", _OCI),
    ("fd00:a9fe:a9fe::1/128", "Linode (Akamai)", "instance metadata over IPv6", _LINODE),
    ("fd00:42::42/128", "Scaleway", "instance metadata over IPv6", _PEER),
    ("fd00:100::100:200/128", "Alibaba Cloud", "instance metadata over IPv6", _PEER),
)

CLOUD_ADDRESSES: tuple[CloudAddress, ...] = tuple(
    CloudAddress(ip_network(net), provider, service, source) for net, provider, service, source in _ROWS
)
"""The reviewed table (see the module docstring for how a row gets in)."""


def cloud_service(ip: IPv4Address | IPv6Address) -> CloudAddress | None:
    """The table row `ip` falls in, or None.

    >>> cloud_service(IPv4Address("168.63.129.16")).provider
    'Azure'
    >>> cloud_service(IPv6Address("fd00:ec2::254")).service.startswith("IMDS")
    True
    >>> cloud_service(IPv4Address("168.63.129.17")) is None
    True
    """
    for row in CLOUD_ADDRESSES:
        if ip.version == row.network.version and ip in row.network:
            return row
    return None
