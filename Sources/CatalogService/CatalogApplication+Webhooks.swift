import CatalogIdentity
import CatalogModels
import CatalogOutbound
import CatalogStore
import Foundation
import Logging

/// Webhooks' side of the application: the key their secrets are sealed with, the address
/// policy, and the worker that sends them.
extension CatalogApplication {
    /// The routes' and the worker's parts, made from the configuration: the worker is
    /// `nil` when deliveries are off or libcurl cannot be loaded (messages then wait).
    static func webhooks(
        _ configuration: CatalogConfiguration, store: CatalogStore, holder: String
    ) throws -> (
        secrets: WebhookSecrets?, policy: AddressPolicy, worker: WebhookWorker?
    ) {
        let policy = AddressPolicy(
            allowed: try configuration.webhookAllowedNetworks.flatMap(IPNetwork.list), plainHTTP: try configuration.webhookHTTPNetworks.flatMap(IPNetwork.list))
        let secrets: WebhookSecrets?
        let logger = Logger(label: "catalog.webhooks")
        if let file = configuration.webhookKeyFile {
            secrets = WebhookSecrets(box: try SecretBox.load(file: file, create: false))
            if SecretBox.isExposed(file: file) { logger.warning("The webhook key file \(file) may be read by others than its owner: chmod 600 it.") }
        } else if store.mayBeShared {
            // Each replica would make a key of its own and open no other's secrets.
            secrets = nil
        } else {
            let file = besideDatabase("webhook.key", configuration.databasePath)
            // A key made anew would open none of the secrets sealed with the one lost.
            if !FileManager.default.fileExists(atPath: file), try !store.webhooks.list().isEmpty {
                throw SecretBox.Failure(
                    description: "\(file) is missing, and the database holds webhook endpoints whose secrets it sealed: put it back (or name it with --webhook-key-file).")
            }
            secrets = WebhookSecrets(box: try SecretBox.load(file: file, create: true))
        }
        guard configuration.webhookDeliveries, let secrets else { return (secrets, policy, nil) }
        let caFile = configuration.webhookCAFile
        var settings = WebhookSettings()
        // At least 100 ms (curl takes 0 for "no limit").
        settings.timeoutMilliseconds = max(100, Int(milliseconds(configuration.webhookTimeout)))
        settings.backlog = configuration.webhookBacklog
        settings.leaseMilliseconds = max(1000, milliseconds(configuration.webhookLease))
        if let clock = configuration.webhookClock { settings.clock = clock }
        return (
            secrets, policy,
            WebhookWorker(
                changes: store.changes, queue: store.webhookQueue, secrets: secrets, makeSender: { try HTTPSender(policy: policy, caFile: caFile) }, settings: settings,
                holder: holder, version: version)
        )
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// Wakes the webhook dispatcher and sender to look for events and due deliveries now
    /// (tests that move their clock call it), without waiting for them. - Returns: false
    /// when webhooks are not sent from here.
    @discardableResult
    public func wakeWebhooks() -> Bool {
        guard let webhookWorker else { return false }
        webhookWorker.wakeAll()
        return true
    }
}
