"""Talking to SGLang: every byte the adapter sends an engine goes through here.

Owns: the SGLang HTTP client with its timeouts, retries and attempt budget (`client`), its httpx
transport on aiohttp (`transport`), cassette recording (`recording`), the server/model probes
(`probe`), what sits at an engine address: one server or the SGLang router and its workers
(`topology`), the loopback proxy bypass (`proxies`), and one engine address for one rollout
function: one client, its facts read once (`session`).
May import: `adapter.errors`, `adapter.config`, `adapter.wire`.
"""
