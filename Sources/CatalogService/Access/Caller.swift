import CatalogModels
import CatalogStore

/// Who makes a request: anonymous, or a user acting with a role (its API key's, which
/// never exceeds the user's, or the user's own for an identity token).
struct Caller: Sendable {
    /// The user; `nil` when anonymous.
    let userID: CatalogID?
    /// What the credential may do; `nil` when anonymous.
    let role: Role?
    /// The API key the request came with, if any.
    let keyID: CatalogID?
    /// When that key expires (milliseconds since 1970), if it does.
    let keyExpires: Int64?
    /// Whether the credential carries its user's whole role (not a weaker key of a
    /// stronger user): what deleting the account takes.
    let hasUsersRole: Bool

    static let anonymous = Caller(userID: nil, role: nil, keyID: nil, keyExpires: nil, hasUsersRole: false)

    init(userID: CatalogID?, role: Role?, keyID: CatalogID?, keyExpires: Int64?, hasUsersRole: Bool) {
        self.userID = userID
        self.role = role
        self.keyID = keyID
        self.keyExpires = keyExpires
        self.hasUsersRole = hasUsersRole
    }

    init(_ credential: StoredCredential) {
        self.init(
            userID: credential.userID, role: credential.role, keyID: credential.keyID, keyExpires: credential.expires,
            hasUsersRole: credential.hasUsersRole)
    }

    /// Whether the caller has `role` or a higher one.
    func has(_ role: Role) -> Bool {
        self.role.map { $0 >= role } ?? false
    }

    /// Whether the caller is this user.
    func `is`(_ user: CatalogID?) -> Bool {
        user != nil && userID == user
    }

    /// What the caller sees of hidden resources: everything for editors and admins, else
    /// only its own.
    var viewer: Viewer { has(.editor) ? .everything : .user(userID) }

    /// The signed-in caller's user id; 401 when anonymous.
    func user() throws(APIError) -> CatalogID {
        guard let userID else { throw APIError.unauthenticated }
        return userID
    }

    /// Checks that the caller may change a resource `owner` owns (`hidden` when others
    /// may not see it): its owner, an editor or an admin. Others get 404 for what they
    /// cannot see, and 403 for what they can.
    func checkMayChange(owner: CatalogID?, hidden: Bool) throws(APIError) {
        if has(.editor) || self.is(owner) { return }
        if hidden { throw APIError.notFound }
        throw APIError.forbidden("Only its owner, editors and admins may change this resource.")
    }
}

/// Who may call a route, before what the handler checks of ownership.
enum Access: String, Sendable {
    /// Anyone, without looking at credentials: health, readiness, the contract.
    case open
    /// Anyone, unless reads require a credential (`--require-auth-for-reads`); a credential
    /// sent must be valid.
    case read
    /// Any signed-in caller (owners, for routes that check ownership).
    case member
    /// Editors and admins.
    case editor
    /// Admins.
    case admin
}
