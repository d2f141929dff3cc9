import CatalogModels
import Foundation

/// `/v1/api-keys`: create, list and revoke API keys. A key's secret is in the answer
/// to its creation only.
public struct APIKeysClient: Sendable {
    let client: CatalogClient
    private var keys: ResourceClient<APIKey, APIKeyInput> { ResourceClient(client: client, path: "/v1/api-keys") }

    /// Creates a key; the answer holds its secret, which is never shown again.
    public func create(_ input: APIKeyInput) async throws(CatalogClientError) -> CreatedAPIKey {
        try client.decode(CreatedAPIKey.self, from: await client.send("POST", "/v1/api-keys", body: client.encode(input), contentType: "application/json").data)
    }

    /// One page of keys (the caller's; every key for admins).
    public func list(_ query: ListQuery = ListQuery()) async throws(CatalogClientError) -> Page<APIKey> {
        try await keys.list(query)
    }

    /// Every key, page after page.
    public func all(_ query: ListQuery = ListQuery()) -> AsyncThrowingStream<APIKey, any Error> {
        keys.all(query)
    }

    /// Revokes the key `id`: the next request with it gets 401.
    public func revoke(_ id: CatalogID) async throws(CatalogClientError) {
        try await keys.delete(id)
    }
}
