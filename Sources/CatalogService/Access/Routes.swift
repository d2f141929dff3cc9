import Foundation
import CatalogModels
import CatalogStore
import HTTPServer

/// A route's work, given the request and its caller.
enum Endpoint: Sendable {
    /// Runs on the event loop: microseconds, never blocking (a read, a rendering).
    case inline(@Sendable (HTTPRequest, Caller) throws -> HTTPResponse)
    /// Starts work that answers later through the completion (a durable write).
    case later(@Sendable (HTTPRequest, Caller, @escaping Completion) throws -> Void)
    /// Runs on the pool reserved for blocking work (a backup).
    case blocking(@Sendable (HTTPRequest, Caller) throws -> HTTPResponse)
    /// A read that runs on the event loop when `isExpensive` says the request is cheap,
    /// and otherwise on the small pool reserved for expensive reads (searches,
    /// geographic lists), under that pool's larger ``ReadBudget``.
    case read(isExpensive: @Sendable (HTTPRequest) -> Bool, @Sendable (HTTPRequest, Caller) throws -> HTTPResponse)
}

/// The pool for expensive reads: half the cores, so the event loops always keep a core,
/// and a short queue (a full one answers 503 at once).
enum ExpensiveReads {
    static let pool = WorkPool(name: "reads", threads: max(1, ProcessInfo.processInfo.activeProcessorCount / 2), queueLimit: 64)
    /// The work one expensive read may do before it is interrupted.
    static let allowance: Duration = .seconds(1)

    /// Answers through `responder` with what `body` returns, run on the pool.
    static func run(for responder: Responder, _ body: @escaping @Sendable () throws -> HTTPResponse) {
        pool.run(for: responder) {
            ReadBudget.allow(allowance)
            return try body()
        }
    }
}

/// The service's routes, each registered with who may call it (``Access``): the router
/// authenticates the caller and checks its role before the endpoint runs. Every route
/// is listed in ``table``, which the role × route test walks.
struct Routes {
    private(set) var router = Router()
    /// Every route with its access, in registration order.
    private(set) var table: [(method: HTTPMethod, pattern: String, access: Access)] = []
    let authenticator: Authenticator
    /// Whether reads need a credential too (`--require-auth-for-reads`).
    let readsNeedCredential: Bool

    init(authenticator: Authenticator, readsNeedCredential: Bool) {
        self.authenticator = authenticator
        self.readsNeedCredential = readsNeedCredential
    }

    mutating func add(_ method: HTTPMethod, _ pattern: String, _ access: Access, _ endpoint: Endpoint) {
        table.append((method, pattern, access))
        router.add(method, pattern, handler(access, endpoint))
    }

    private func handler(_ access: Access, _ endpoint: Endpoint) -> Handler {
        if access == .open {
            return switch endpoint {
            case let .inline(body): .inline { try body($0, .anonymous) }
            case let .later(body): .later { try body($0, .anonymous, $1) }
            case let .blocking(body): .blocking { try body($0, .anonymous) }
            case let .read(isExpensive, body):
                .either { request, responder in
                    guard isExpensive(request) else { return try body(request, .anonymous) }
                    ExpensiveReads.run(for: responder) { try body(request, .anonymous) }
                    return nil
                }
            }
        }
        let minimum: Role? = switch access {
        case .open: nil
        case .read: readsNeedCredential ? .member : nil
        case .member: .member
        case .editor: .editor
        case .admin: .admin
        }
        return .either { [authenticator] request, responder in
            switch try authenticator.authenticate(request) {
            case let .now(caller):
                try Self.authorize(caller, minimum)
                return try Self.run(endpoint, request, caller, responder)
            case let .later(wait):
                wait { result in
                    // The caller's user was just created; go on off the writer's thread.
                    Handler.runBlocking {
                        do {
                            let caller = try result.get()
                            try Self.authorize(caller, minimum)
                            if let response = try Self.run(endpoint, request, caller, responder) { responder.respond(response) }
                        } catch {
                            responder.fail(error)
                        }
                    }
                }
                return nil
            }
        }
    }

    /// 401 when the caller is anonymous and the route needs a role, 403 when its role is too low.
    private static func authorize(_ caller: Caller, _ minimum: Role?) throws(APIError) {
        guard let minimum else { return }
        guard caller.role != nil else { throw APIError.unauthenticated }
        guard caller.has(minimum) else { throw APIError.forbidden("This needs the \(minimum.rawValue) role or a higher one.") }
    }

    /// Runs `endpoint`: its response when it has one now, `nil` when it answers through `responder`.
    private static func run(_ endpoint: Endpoint, _ request: HTTPRequest, _ caller: Caller, _ responder: Responder) throws -> HTTPResponse? {
        switch endpoint {
        case let .inline(body):
            return try body(request, caller)
        case let .later(body):
            try body(request, caller) { result in
                switch result {
                case let .success(response): responder.respond(response)
                case let .failure(error): responder.fail(error)
                }
            }
            return nil
        case let .blocking(body):
            WorkPool.blocking.run(for: responder) { try body(request, caller) }
            return nil
        case let .read(isExpensive, body):
            guard isExpensive(request) else { return try body(request, caller) }
            ExpensiveReads.run(for: responder) { try body(request, caller) }
            return nil
        }
    }
}
