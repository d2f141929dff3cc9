"""near: GET /v1/locations?near=LAT,LNG without radius (every location by distance)"""

from noisy.common import *  # noqa: F401,F403 (settings and request helpers)


async def attack(self):
    def batch():
        lat, lng = self.rng.uniform(-89, 89), self.rng.uniform(-179, 179)
        return [("GET", request_bytes("GET", f"/v1/locations?near={lat:.4f},{lng:.4f}"))]
    await self.exchange_loop(batch)
