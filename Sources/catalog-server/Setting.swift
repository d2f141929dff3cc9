import ArgumentParser

/// One setting of `catalog-server`, declared once: its environment variable (its flag is
/// the same name without `CATALOG_`, in lower case with dashes: `CATALOG_KEEP_ALIVE_TIMEOUT`
/// is `--keep-alive-timeout`), what it means, its default and the values it takes. The
/// flag's help and the reading of its value both come from here (``ServerSettings``), so
/// they cannot disagree.
struct Setting<Value>: Sendable {
    /// `CATALOG_…`.
    let variable: String
    /// The flag's help: the summary, then the variable and the default in brackets.
    let help: ArgumentHelp
    private let reader: @Sendable (Settings, String?) throws(SettingError) -> Value

    init(
        _ variable: String, _ summary: String, shownDefault: String?, after: String = "",
        read: @escaping @Sendable (Settings, String?) throws(SettingError) -> Value
    ) {
        self.variable = variable
        help = ArgumentHelp(summary + " [" + variable + (shownDefault.map { ", default " + $0 } ?? "") + "]" + (after.isEmpty ? "." : after))
        reader = read
    }

    /// The value: the flag's (`flag`), else the environment's, else the default.
    /// - Throws: ``SettingError`` naming the flag or variable, for a value out of bounds.
    func read(_ settings: Settings, _ flag: String?) throws(SettingError) -> Value {
        try reader(settings, flag)
    }
}

extension Setting where Value == String {
    /// Text, with a default.
    static func text(_ variable: String, default value: String, _ summary: String, after: String = "") -> Setting {
        Setting(variable, summary, shownDefault: value, after: after) { settings, flag throws(SettingError) in
            try settings.text(flag, variable, default: value)
        }
    }
}

extension Setting where Value == String? {
    /// Text, or nothing.
    static func optionalText(_ variable: String, _ summary: String, shownDefault: String? = nil, after: String = "") -> Setting {
        Setting(variable, summary, shownDefault: shownDefault, after: after) { settings, flag throws(SettingError) in
            try settings.optionalText(flag, variable)
        }
    }
}

extension Setting where Value == Int {
    /// A whole number in `range`.
    static func integer(
        _ variable: String, default value: Int, in range: ClosedRange<Int>, _ summary: String, shownDefault: String? = nil,
        after: String = ""
    ) -> Setting {
        Setting(variable, summary, shownDefault: shownDefault ?? String(value), after: after) { settings, flag throws(SettingError) in
            try settings.integer(flag, variable, default: value, in: range)
        }
    }
}

extension Setting where Value == Duration {
    /// A number of seconds.
    static func seconds(_ variable: String, default value: Double, _ summary: String) -> Setting {
        Setting(variable, summary, shownDefault: value == value.rounded() ? String(Int(value)) : String(value)) { settings, flag throws(SettingError) in
            try settings.seconds(flag, variable, default: value)
        }
    }

    /// A period such as `30d`, `12h` or `3600s`.
    static func period(_ variable: String, default value: Duration, shownDefault: String, _ summary: String) -> Setting {
        Setting(variable, summary, shownDefault: shownDefault) { settings, flag throws(SettingError) in
            try settings.period(flag, variable, default: value)
        }
    }
}

extension Setting {
    /// One of the named `choices`.
    static func choice(_ variable: String, default value: Value, from choices: [(String, Value)], _ summary: String) -> Setting
    where Value: Equatable & Sendable {
        let shown = choices.first { $0.1 == value }?.0
        return Setting(variable, summary, shownDefault: shown) { settings, flag throws(SettingError) in
            try settings.choice(flag, variable, default: value, from: choices)
        }
    }
}

/// A setting that is a list: a repeated flag, or the variable's comma-separated values.
struct ListSetting: Sendable {
    let variable: String
    let help: ArgumentHelp

    init(_ variable: String, _ summary: String, shownDefault: String? = nil) {
        self.variable = variable
        help = ArgumentHelp(summary + " [" + variable + ", comma-separated" + (shownDefault.map { "; default " + $0 } ?? "") + "].")
    }

    func read(_ settings: Settings, _ flags: [String]) throws(SettingError) -> [String] {
        try settings.list(flags, variable)
    }
}

/// A switch: a flag that turns it on, or the variable set to true or false.
struct SwitchSetting: Sendable {
    let variable: String
    let help: ArgumentHelp
    let defaultValue: Bool

    init(_ variable: String, default value: Bool, _ summary: String) {
        self.variable = variable
        defaultValue = value
        help = ArgumentHelp(summary + " [" + variable + "=" + String(!value) + "].")
    }

    /// On when the flag says so (`flagGiven`: its flag sets the opposite of the default),
    /// else as the variable says, else the default.
    func read(_ settings: Settings, flagGiven: Bool) throws(SettingError) -> Bool {
        // The variable is checked even when the flag decides: a bad value never goes unnoticed.
        let fromVariable = try settings.boolean(nil, variable, default: defaultValue)
        return flagGiven ? !defaultValue : fromVariable
    }
}
