import Foundation

/// A setting with an invalid value, named as the user wrote it.
struct SettingError: Error, CustomStringConvertible {
    let description: String
}

/// Resolves each setting from its flag, else its environment variable, else its default,
/// checking the value.
struct Settings {
    let environment: [String: String]

    /// Runs `body` with the process environment; an invalid setting prints one line to
    /// stderr and exits with code 64.
    static func resolving<T>(_ body: (Settings) throws(SettingError) -> T) throws -> T {
        do {
            return try body(Settings(environment: ProcessInfo.processInfo.environment))
        } catch {
            fail(error.description)
        }
    }

    /// The port of the server on this machine, for the subcommands that talk to it
    /// (`healthcheck`, `backup`): `CATALOG_PORT`, else 8080.
    /// Whether it speaks TLS: `--tls`, or `CATALOG_TLS_CERTIFICATE` set as for the server.
    static func localServer(tls: Bool) throws -> (port: Int, tls: Bool) {
        try resolving { settings throws(SettingError) in
            // The server's port, but not 0: a client must name the port it calls.
            let port = try settings.integer(nil, ServerSettings.port.variable, default: 8080, in: 1...65535)
            let certificate = try ServerSettings.tlsCertificate.read(settings, nil)
            return (port, tls || certificate != nil)
        }
    }

    /// Prints `message` as one line on stderr and exits with code 64 (usage error).
    static func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("catalog-server: \(message)\n".utf8))
        exit(64)
    }

    /// The flag's value with its name, else the environment's, else nil.
    private func raw(_ flag: String?, _ variable: String) -> (value: String, source: String)? {
        if let flag { return (flag, "--" + Self.flagName(variable)) }
        if let value = environment[variable] { return (value, variable) }
        return nil
    }

    /// `CATALOG_KEEP_ALIVE_TIMEOUT` → `keep-alive-timeout`.
    private static func flagName(_ variable: String) -> String {
        variable.dropFirst("CATALOG_".count).lowercased().replacingOccurrences(of: "_", with: "-")
    }

    func text(_ flag: String?, _ variable: String, default value: String) throws(SettingError) -> String {
        try optionalText(flag, variable) ?? value
    }

    func optionalText(_ flag: String?, _ variable: String) throws(SettingError) -> String? {
        guard let (value, source) = raw(flag, variable) else { return nil }
        guard !value.trimmingCharacters(in: .whitespaces).isEmpty else { throw SettingError(description: "\(source) must not be empty") }
        return value
    }

    /// The repeated flag's values, else the environment's comma-separated ones.
    func list(_ flags: [String], _ variable: String) throws(SettingError) -> [String] {
        let values = flags.isEmpty ? (environment[variable]?.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } ?? []) : flags
        if values.contains(where: \.isEmpty) { throw SettingError(description: "\(flags.isEmpty ? variable : "--" + Self.flagName(variable)) must not hold an empty value") }
        return values
    }

    func integer(_ flag: String?, _ variable: String, default value: Int, in range: ClosedRange<Int>) throws(SettingError) -> Int {
        guard let (text, source) = raw(flag, variable) else { return value }
        guard let number = Int(text), range.contains(number) else {
            throw SettingError(description: "\(source) must be an integer from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
        }
        return number
    }

    func seconds(_ flag: String?, _ variable: String, default value: Double) throws(SettingError) -> Duration {
        guard let (text, source) = raw(flag, variable) else { return .milliseconds(Int64(value * 1000)) }
        guard let number = Double(text), number.isFinite, number > 0, number <= 86_400 else {
            throw SettingError(description: "\(source) must be a number of seconds greater than 0 and at most 86400, not '\(text)'")
        }
        return .milliseconds(Int64(number * 1000))
    }

    /// A period written as a whole number and a unit: `d`, `h`, `m` or `s` (1 minute to 10 years).
    func period(_ flag: String?, _ variable: String, default value: Duration) throws(SettingError) -> Duration {
        guard let (text, source) = raw(flag, variable) else { return value }
        let units: [Character: Int64] = ["d": 86_400, "h": 3_600, "m": 60, "s": 1]
        guard let unit = text.last.flatMap({ units[$0] }), let count = Int64(text.dropLast()), count > 0, count <= 3_650 * 86_400,
            (60...(3_650 * 86_400)).contains(count * unit)
        else {
            throw SettingError(description: "\(source) must be a whole number with a unit (d, h, m or s), from 1 minute to 3650 days, such as 30d; not '\(text)'")
        }
        return .seconds(count * unit)
    }

    func choice<T>(_ flag: String?, _ variable: String, default value: T, from choices: [(String, T)]) throws(SettingError) -> T {
        guard let (text, source) = raw(flag, variable) else { return value }
        guard let match = choices.first(where: { $0.0 == text.lowercased() }) else {
            throw SettingError(description: "\(source) must be one of \(choices.map(\.0).joined(separator: ", ")), not '\(text)'")
        }
        return match.1
    }

    func boolean(_ flag: String?, _ variable: String, default value: Bool) throws(SettingError) -> Bool {
        guard let (text, source) = raw(flag, variable) else { return value }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default: throw SettingError(description: "\(source) must be true or false, not '\(text)'")
        }
    }
}

/// Writes one line to standard output at once (unbuffered, so pipes and `docker logs`
/// see it immediately).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
