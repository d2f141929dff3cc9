import ArgumentParser
import CatalogService
import Foundation

/// `catalog-server backup --to FILE`: asks the running server (on 127.0.0.1:$CATALOG_PORT)
/// for an online backup, then moves the copy from the server's backup folder (the same
/// `--backup-dir`, or `backups` beside the same `--database`) to FILE, and its images
/// (when kept on local disk) to the folder beside it (`FILE` without `.sqlite`, and
/// `.media`). No second process opens the live database.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Have the running server write a consistent copy of its database to FILE.")

    @Option(help: "Where to put the copy (must not exist).")
    var to: String

    @Option(help: ServerSettings.apiKey.help) var apiKey: String?
    @Option(help: ServerSettings.backupDir.help) var backupDir: String?

    @Flag(help: "Speak TLS (the default when CATALOG_TLS_CERTIFICATE is set); the certificate is not verified.")
    var tls = false

    @OptionGroup var storage: StorageOptions

    func run() throws {
        guard !FileManager.default.fileExists(atPath: to) else { Settings.fail("\(to) already exists") }
        let images = CatalogApplication.backupMediaFolder(of: to)
        guard !FileManager.default.fileExists(atPath: images) else { Settings.fail("\(images) already exists") }
        let (port, tls) = try Settings.localServer(tls: tls)
        let (key, folder) = try Settings.resolving { settings throws(SettingError) -> (String?, String) in
            let key = try ServerSettings.apiKey.read(settings, apiKey)
            if let folder = try ServerSettings.backupDir.read(settings, backupDir) { return (key, folder) }
            return (key, CatalogApplication.defaultBackupDirectory(databasePath: try storage.database(settings)))
        }
        guard let key else { Settings.fail("a backup needs an admin API key: --api-key or CATALOG_API_KEY") }
        guard
            let answer = HealthProbe.request(
                "POST", port: port, tls: tls, path: "/admin/backups", timeout: 600,
                headers: ["Authorization: Bearer \(key)"])
        else {
            Settings.fail("no server answers on 127.0.0.1:\(port)")
        }
        guard answer.hasPrefix("HTTP/1.1 201 "), let bodyStart = answer.range(of: "\r\n\r\n"),
            let created = try? JSONSerialization.jsonObject(with: Data(answer[bodyStart.upperBound...].utf8)) as? [String: Any],
            let name = created["name"] as? String, !name.contains("/")
        else { Settings.fail("the backup failed: \(answer.split(separator: "\r\n").first ?? "")") }
        let path = URL(fileURLWithPath: folder).appendingPathComponent(name).path
        do {
            try FileManager.default.moveItem(atPath: path, toPath: to)
        } catch {
            Settings.fail("the backup is \(name) in the server's backup folder but could not be moved from \(folder) to \(to): \(error.localizedDescription)")
        }
        let media = URL(fileURLWithPath: folder).appendingPathComponent(CatalogApplication.backupMediaFolder(of: name)).path
        var imagesNote = ""
        if let count = created["images"] as? Int, FileManager.default.fileExists(atPath: media) {
            do {
                try FileManager.default.moveItem(atPath: media, toPath: images)
            } catch {
                Settings.fail("the images are in \(media) but could not be moved to \(images): \(error.localizedDescription)")
            }
            imagesNote = ", \(count) images in \(images)"
        }
        say("backup written to \(to) (\(created["bytes"] ?? "?") bytes, integrity ok\(imagesNote))")
    }
}
