import CatalogIdentity
import CatalogModels
import CatalogSchema
import Foundation

/// Who a credential stands for, as the store knows it.
public struct StoredCredential: Sendable, Hashable {
    /// The user.
    public let userID: CatalogID
    /// What the credential may do: the lower of its key's role and its user's.
    public let role: Role
    /// Whether that is all its user may do (not a weaker key of a stronger user).
    public var hasUsersRole = true
    /// The API key, when the credential is one.
    public let keyID: CatalogID?
    /// When the key expires (milliseconds since 1970), if it does.
    public let expires: Int64?
    /// When the key's use was last recorded (milliseconds since 1970), if ever.
    public var lastUsed: Int64? = nil
}

/// Users, their API keys and identities: what the access layer reads on a credential's
/// first use, and the writes that change who may do what.
public final class AccountStore: Sendable {
    /// Profiles (`/v1/users`).
    public let users: ResourceStore
    /// API keys, without their secrets (`/v1/api-keys`).
    public let keys: ResourceStore
    private let database: any SQLDatabase
    private let images: ImageRecords
    private let insertKeySQL: String
    private let keyCreationMembers: [Int]

    init(database: any SQLDatabase, images: ImageRecords) {
        self.database = database
        self.images = images
        users = ResourceStore(
            .user, database: database,
            relations: Relations(didUpdate: { db, id in
                // Comments show their writer's current display name.
                let writer = ResourceSchema.commentWriter
                try db.execute(
                    """
                    UPDATE comments SET \(writer.name) = (SELECT display_name FROM users WHERE id = ?), version = version + 1,
                        updated_at = \(db.dialect.greatest)(?, created_at)
                    WHERE \(writer.user) = ? AND \(writer.name) != (SELECT display_name FROM users WHERE id = ?)
                    """, [id.rawValue, Timestamp.milliseconds(Date()), id.rawValue, id.rawValue])
            }))
        keys = ResourceStore(.apiKey, database: database)
        let creation = ResourceSchema.apiKey.creationColumns
        keyCreationMembers = creation.map(\.index)
        let columns = ["id"] + creation.map(\.column) + ["created_at", "updated_at", "version", "prefix", "secret_hash"]
        insertKeySQL = insertStatement(ResourceSchema.apiKey.table, columns) + keys.returning
    }

    // MARK: Credentials

    /// The key whose secret has SHA-256 `digest`, with its user, or `nil` when there is none.
    public func key(digest: [UInt8]) throws(StoreError) -> StoredCredential? {
        try guarded {
            try database.read { db in
                guard
                    let row = try db.fetchRow(
                        """
                        SELECT k.id, k.user_id, k.role, u.role, k.expires_at, k.secret_hash, k.last_used_at FROM api_keys k JOIN users u ON u.id = k.user_id
                        WHERE k.secret_hash = ?
                        """, [digest])
                else { return nil }
                // The index found it by equality; the comparison that decides is constant-time.
                guard let stored = row[5].bytes, Crypto.constantTimeEqual(stored, digest), let keyID = row[0].string.flatMap(CatalogID.init),
                    let userID = row[1].string.flatMap(CatalogID.init)
                else { return nil }
                let keyRole = Self.role(row[2].string), userRole = Self.role(row[3].string)
                return StoredCredential(
                    userID: userID, role: min(keyRole, userRole), hasUsersRole: keyRole >= userRole, keyID: keyID, expires: row[4].int64,
                    lastUsed: row[6].int64)
            }
        }
    }

    /// Records that the key `id` was used at `time` (milliseconds), without waiting.
    public func recordUse(ofKey id: CatalogID, at time: Int64) {
        database.submit(
            { db in
                try db.execute("UPDATE api_keys SET last_used_at = \(db.dialect.greatest)(coalesce(last_used_at, 0), ?) WHERE id = ?", [time, id.rawValue])
            }, completion: { _ in })
    }

    /// The user an identity provider's (`issuer`, `subject`) names, if it has been seen.
    public func user(issuer: String, subject: String) throws(StoreError) -> StoredCredential? {
        try guarded {
            try database.read { db in try db.fetchRow("SELECT id, role FROM users WHERE issuer = ? AND subject = ?", [issuer, subject]) }
        }.flatMap { row in row[0].string.flatMap(CatalogID.init).map { StoredCredential(userID: $0, role: Self.role(row[1].string), keyID: nil, expires: nil) } }
    }

    /// The user (`issuer`, `subject`) names, created as a `member` when it is new, with
    /// `email` (when valid) and a display name from it.
    public func provision(issuer: String, subject: String, email: String?, completion: @escaping @Sendable (Result<StoredCredential, any Error>) -> Void) {
        let email = email.flatMap { UserInput.emailRule.violation($0) == nil ? $0 : nil }
        let name =
            email.map { String($0.prefix { $0 != "@" }.prefix(UserInput.displayNameLength.upperBound)) }
            .flatMap { UserInput.displayNameRule.violation($0) == nil ? $0 : nil } ?? "New user"
        database.submit(
            { db -> StoredCredential in
                let now = Timestamp.milliseconds(Date())
                try db.execute(
                    """
                    INSERT INTO users (id, display_name, email, role, issuer, subject, created_at, updated_at, version)
                    VALUES (?, ?, ?, 'member', ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING
                    """, [CatalogID().rawValue, name, email, issuer, subject, now, now])
                guard let row = try db.fetchRow("SELECT id, role FROM users WHERE issuer = ? AND subject = ?", [issuer, subject]),
                    let id = row[0].string.flatMap(CatalogID.init)
                else { throw StoreError.notFound }
                return StoredCredential(userID: id, role: Self.role(row[1].string), keyID: nil, expires: nil)
            }, completion: { completion($0.mapError { StoreError.from($0) }) })
    }

    // MARK: Keys

    /// The user whose key `id` is, with the key's role; `nil` when there is no such key.
    public func owner(ofKey id: CatalogID) throws(StoreError) -> (user: CatalogID, role: Role)? {
        try guarded {
            try database.read { db in try db.fetchRow("SELECT user_id, role FROM api_keys WHERE id = ?", [id.rawValue]) }
        }.flatMap { row in row[0].string.flatMap(CatalogID.init).map { ($0, Self.role(row[1].string)) } }
    }

    /// The most keys one user may have.
    public static let maxKeysPerUser = 100

    /// Creates a key from `values` (read by ``ResourceSchema/creation`` of keys) for the
    /// user they name, or `caller` when they name none, with the secret's
    /// `digest` and `prefix`. Fails with `invalid` when the user does not exist, when the
    /// role is above the user's, or when it expires in the past.
    package func createKey(
        _ values: FieldValues, caller: CatalogID, digest: [UInt8], prefix: String, options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<RenderedResource, any Error>) -> Void
    ) {
        var values = values
        guard let userIndex = values.fields.firstIndex(where: { $0.column == "user_id" }), let roleIndex = values.fields.firstIndex(where: { $0.column == "role" })
        else { return completion(.failure(StoreError.unavailable("The API key declaration lacks its user or role."))) }
        if values.values[userIndex] == nil || values.values[userIndex] == .null { values.values[userIndex] = .text(caller.rawValue) }
        let userField = values.fields[userIndex], roleField = values.fields[roleIndex]
        keys.submit(options, completion) { [self] db in
            let now = Timestamp.milliseconds(Date())
            var errors: [FieldError] = []
            // The user's row is locked: keys are counted against it, one creation after another.
            let userRole = try db.fetchValue("SELECT role FROM users WHERE id = ?" + db.dialect.forUpdate, [values.values[userIndex]?.text]).string
            let role = Self.role(values.values[roleIndex]?.text ?? "")
            if userRole == nil {
                errors.append(Violation(.notFound, "No user has this id.").at(userField.pointer))
            } else if role > Self.role(userRole) {
                errors.append(Violation(.outOfRange, "Must not be above the user's role (\(userRole ?? "")).").at(roleField.pointer))
            }
            if let expiresIndex = values.fields.firstIndex(where: { $0.column == "expires_at" }), let expires = values.values[expiresIndex]?.integer,
                expires <= now
            {
                errors.append(Violation(.outOfRange, "Must be in the future.").at(values.fields[expiresIndex].pointer))
            }
            guard errors.isEmpty else { throw StoreError.invalid(errors) }
            let count = try db.fetchValue("SELECT count(*) FROM api_keys WHERE user_id = ?", [values.values[userIndex]?.text]).int ?? 0
            guard count < Self.maxKeysPerUser else {
                throw StoreError.conflict("A user has at most \(Self.maxKeysPerUser) API keys; revoke one first.")
            }
            let arguments: SQLArguments = [CatalogID().rawValue] + keys.arguments(values, keyCreationMembers) + [now, now, 1, prefix, digest]
            return try keys.renderWritten(db, insertKeySQL, arguments)
        }
    }

    /// Creates a user with `role` and a key for it, at once: how the first admin gets in
    /// (`catalog-server keys create`). Waits for the write to be durable.
    /// - Returns: the user's and the key's ids.
    public func bootstrap(name: String, role: Role, keyName: String, digest: [UInt8], prefix: String) throws -> (user: CatalogID, key: CatalogID) {
        let errors = [UserInput.displayNameRule.violation(name), APIKeyInput.nameRule.violation(keyName)].compactMap { $0?.at("/name") }
        guard errors.isEmpty else { throw StoreError.invalid(errors) }
        let user = CatalogID(), key = CatalogID()
        try database.write(atomic: true) { db in
            let now = Timestamp.milliseconds(Date())
            try db.execute(
                "INSERT INTO users (id, display_name, role, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, 1)",
                [user.rawValue, name, role.rawValue, now, now])
            try db.execute(
                """
                INSERT INTO api_keys (id, user_id, name, role, prefix, secret_hash, created_at, updated_at, version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)
                """, [key.rawValue, user.rawValue, keyName, role.rawValue, prefix, digest, now, now])
        }
        return (user, key)
    }

    // MARK: Deleting accounts

    /// Deletes the user `id`, if `preconditions` hold: its keys go with it, its private
    /// playlists are deleted and its public ones lose their owner, and its comments stay
    /// readable, their writer shown as deleted. Its avatar and its private playlists'
    /// covers, when nothing else shows them, are made due for removal at once: the
    /// completion has their hashes, for the sweep to remove them (``ImageRecords``).
    public func deleteUser(
        _ id: CatalogID, preconditions: WritePreconditions = WritePreconditions(), options: WriteOptions = WriteOptions(),
        completion: @escaping @Sendable (Result<[String], any Error>) -> Void
    ) {
        users.submit(options, atomic: true, completion) { [images] db in
            let current = try db.fetchValue("SELECT version FROM users WHERE id = ?" + db.dialect.forDelete, [id.rawValue]).int
            try preconditions.check(current: current)
            var shown = try images.imageHash(db, table: ResourceSchema.user.table, id: id).map { [$0] } ?? []
            let covers = try db.query(
                "SELECT \(ImageSlot.urlColumn) FROM playlists WHERE owner_id = ? AND visibility = ? AND \(ImageSlot.urlColumn) IS NOT NULL",
                [id.rawValue, Visibility.private.rawValue])
            while try covers.step() { shown.append(String(String(decoding: covers.text(0), as: UTF8.self).dropFirst(ImageMember.path.count))) }
            let now = Timestamp.milliseconds(Date())
            let writer = ResourceSchema.commentWriter, greatest = db.dialect.greatest
            try db.execute(
                """
                UPDATE comments SET \(writer.user) = NULL, \(writer.name) = ?, \(writer.gone) = 1, version = version + 1, updated_at = \(greatest)(?, created_at)
                WHERE \(writer.user) = ?
                """, [CommentInput.deletedAuthorName, now, id.rawValue])
            try db.execute("DELETE FROM playlists WHERE owner_id = ? AND visibility = ?", [id.rawValue, Visibility.private.rawValue])
            try db.execute(
                "UPDATE playlists SET owner_id = NULL, version = version + 1, updated_at = \(greatest)(?, created_at) WHERE owner_id = ?",
                [now, id.rawValue])
            try db.execute("DELETE FROM users WHERE id = ?", [id.rawValue])
            return try Set(shown).filter { hash in try images.release(db, hash) }.sorted()
        }
    }

    // MARK: Helpers

    private static func role(_ text: String?) -> Role { text.flatMap(Role.init(rawValue:)) ?? .member }
}
