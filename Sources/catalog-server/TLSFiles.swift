import Foundation
import HTTPServer
import Logging

/// What an operator should hear about the TLS files at startup and after a reload.
enum TLSFiles {
    /// Warns when the private key file is readable by its group or others, and when the
    /// certificate has expired (clients will refuse it). Never logs key material.
    static func check(_ tls: TLSContext, _ logger: Logger) {
        var status = stat()
        if stat(tls.privateKeyFile, &status) == 0, status.st_mode & (S_IRGRP | S_IROTH) != 0 {
            let mode = String(status.st_mode & 0o777, radix: 8)
            logger.warning("the TLS private key \(tls.privateKeyFile) is readable by its group or others (mode \(mode)): chmod 600 it")
        }
        if let expiry = tls.certificateExpiry, expiry < Date() {
            logger.warning("the TLS certificate \(tls.certificateFile) expired on \(expiry.formatted(.iso8601)): clients will refuse it")
        }
    }

    /// The files and the certificate's expiry, for log lines.
    static func metadata(_ tls: TLSContext) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["certificate": "\(tls.certificateFile)", "privateKey": "\(tls.privateKeyFile)"]
        if let expiry = tls.certificateExpiry { metadata["notAfter"] = "\(expiry.formatted(.iso8601))" }
        return metadata
    }
}
