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
        if let file = configuration.webhookKeyFile {
            secrets = WebhookSecrets(box: try SecretBox.load(file: file, create: false))
        } else if store.mayBeShared {
            // Each replica would make a key of its own and open no other's secrets.
            secrets = nil
        } else {
            secrets = WebhookSecrets(box: try SecretBox.load(file: besideDatabase("webhook.key", configuration.databasePath), create: true))
        }
        guard configuration.webhookDeliveries, let secrets else { return (secrets, policy, nil) }
        let sender: HTTPSender
        do {
            sender = try HTTPSender(policy: policy, caFile: configuration.webhookCAFile)
        } catch {
            Logger(label: "catalog.webhooks").error("Webhooks will wait unsent: \(error)")
            return (secrets, policy, nil)
        }
        var settings = WebhookSettings()
        settings.timeoutMilliseconds = Int(configuration.webhookTimeout.components.seconds * 1000 + configuration.webhookTimeout.components.attoseconds / 1_000_000_000_000_000)
        settings.backlog = configuration.webhookBacklog
        settings.leaseMilliseconds = configuration.webhookLease.components.seconds * 1000 + configuration.webhookLease.components.attoseconds / 1_000_000_000_000_000
        if let clock = configuration.webhookClock { settings.clock = clock }
        return (
            secrets, policy,
            WebhookWorker(changes: store.changes, queue: store.webhookQueue, secrets: secrets, sender: sender, settings: settings, holder: holder, version: version)
        )
    }

    /// Turns the webhook events waiting into messages now, and wakes the sender to look
    /// for due deliveries (tests that move their clock call it). - Returns: false when
    /// webhooks are not being sent.
    @discardableResult
    public func wakeWebhooks() throws -> Bool {
        guard let webhookWorker else { return false }
        while try webhookWorker.dispatchOnce() {}
        webhookWorker.wake()
        return true
    }
}
